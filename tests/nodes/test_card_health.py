"""Card health carried by the heartbeat, stored per card with its history, quarantine and release (design §17.3)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from nodes.models import GPU, CardHealthEvent, Node, NodeAuditEntry
from scheduling import lifecycle
from scheduling.models import Task
from scheduling.preemption.settle import settle_preempted
from tests.factories import make_task
from tests.nodes.conftest import card, heartbeat_body

HEARTBEAT = "/api/v1/agent/heartbeat"
XID_48 = {"code": "xid-48", "message": "Xid 48: double-bit ECC error", "at": "2024-11-15T12:02:03+00:00"}


def beat(agent, **health_of_card):
    """A heartbeat of four cards; `health_of_card[f"card{i}"] = (health, errors)` sets a card's reading."""
    cards = []
    for index in range(4):
        health, errors = health_of_card.get(f"card{index}", ("ok", []))
        cards.append(card(index, health=health, errors=errors))
    return agent.post(HEARTBEAT, heartbeat_body(gpus=cards), format="json")


def gpu(registered, index: int) -> GPU:
    return GPU.objects.get(node=registered[0], type="nvidia", index=index)


def test_health_and_errors_are_stored_per_card_with_a_history_of_changes(agent, registered):
    assert beat(agent).status_code == 200
    degraded = {"code": "row-remap-pending", "message": "remapped rows pending", "at": None}
    assert beat(agent, card2=("degraded", [degraded])).status_code == 200
    assert beat(agent, card2=("degraded", [degraded])).status_code == 200
    stored = gpu(registered, 2)
    assert (stored.health, stored.last_error, stored.quarantined) == ("degraded", degraded, False)
    events = list(CardHealthEvent.objects.filter(node=registered[0], card_index=2).values_list("kind", "health"))
    assert events == [("reported", "degraded")]
    assert gpu(registered, 0).health == "ok"


def test_an_agent_that_sends_no_health_reports_healthy_cards(agent, registered):
    assert agent.post(HEARTBEAT, heartbeat_body(cards=2), format="json").status_code == 200
    assert set(GPU.objects.filter(node=registered[0]).values_list("health", flat=True)) == {"ok"}


@pytest.mark.parametrize(("reading", "field"), [
    ({"health": "broken"}, "health"),
    ({"errors": [{"message": "no code"}]}, "code"),
    ({"errors": [{"code": "x", "message": "m", "at": "yesterday"}]}, "at"),
    ({"errors": [{"code": "x", "message": "m", "extra": 1}]}, "extra"),
    ({"errors": "xid"}, "errors"),
    ({"errors": [XID_48] * 17}, "errors"),
])
def test_a_malformed_health_report_is_a_400_naming_the_field_and_changes_nothing(agent, registered, reading, field):
    assert beat(agent, card1=("failed", [XID_48])).status_code == 200
    before = list(GPU.objects.filter(node=registered[0]).order_by("index").values())
    events = CardHealthEvent.objects.count()
    heartbeat_at = Node.objects.get(id=registered[0].id).last_heartbeat_at
    body = heartbeat_body(cards=4)
    body["gpus"][3] = {**body["gpus"][3], **reading}
    body["gpus"][1] = {**body["gpus"][1], "health": "ok"}
    response = agent.post(HEARTBEAT, body, format="json")
    assert response.status_code == 400
    named = response.json()["field"]
    assert named.startswith("gpus[3]") and field in named, named
    assert list(GPU.objects.filter(node=registered[0]).order_by("index").values()) == before
    assert CardHealthEvent.objects.count() == events
    assert Node.objects.get(id=registered[0].id).last_heartbeat_at == heartbeat_at


def test_a_failed_card_is_quarantined_and_stays_so_when_it_reports_healthy_again(agent, registered):
    assert beat(agent, card1=("failed", [XID_48])).status_code == 200
    quarantined = gpu(registered, 1)
    assert quarantined.quarantined and quarantined.quarantine_reason.startswith("xid-48")
    assert beat(agent).status_code == 200
    assert gpu(registered, 1).quarantined
    assert gpu(registered, 1).health == "ok"
    kinds = list(CardHealthEvent.objects.filter(card_index=1).order_by("id").values_list("kind", "health"))
    assert kinds == [("reported", "failed"), ("quarantined", "failed"), ("reported", "ok")]


def test_a_quarantined_card_the_tool_no_longer_lists_keeps_its_row(agent, registered):
    fallen = {"code": "fallen-off-the-bus", "message": "GPU has fallen off the bus", "at": None}
    assert beat(agent, card3=("failed", [fallen])).status_code == 200
    body = heartbeat_body(cards=3)
    assert agent.post(HEARTBEAT, body, format="json").status_code == 200
    kept = gpu(registered, 3)
    assert kept.quarantined and kept.health == "failed" and kept.last_error["code"] == "not-reported"


def test_the_task_on_a_failed_card_stops_and_returns_to_pending_without_counting_as_a_preemption(
        agent, registered, tenant):
    node = registered[0]
    assert beat(agent).status_code == 200
    running = make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[1], gpu_required=1,
                        card_type="nvidia", preemptible=True, preempt_count=0)
    neighbour = make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[2], gpu_required=1,
                          card_type="nvidia")
    Node.objects.filter(id=node.id).update(gpu_used=2)
    assert beat(agent, card1=("failed", [XID_48])).status_code == 200
    running.refresh_from_db()
    assert running.status == lifecycle.PREEMPTING and running.reason.startswith(lifecycle.CARD_FAILED_REASON)
    assert Task.objects.get(id=neighbour.id).status == lifecycle.RUNNING
    assert settle_preempted(running.id)
    running.refresh_from_db()
    assert (running.status, running.preempt_count, running.preemptible, running.node_id) == (
        lifecycle.PENDING, 0, True, None)
    assert running.reason.startswith(lifecycle.CARD_FAILED_REASON)


class TestRelease:
    def url(self, node, index=1, card_type="nvidia"):
        return f"/api/v1/nodes/{node.id}/cards/{card_type}/{index}/release"

    def test_an_admin_releases_a_quarantined_card_audited_and_in_its_history(self, agent, registered, admin_client,
                                                                            admin_user):
        node = registered[0]
        assert beat(agent, card1=("failed", [XID_48])).status_code == 200
        assert beat(agent).status_code == 200
        response = admin_client.post(self.url(node))
        assert response.status_code == 200, response.content
        assert response.json()["quarantined"] is False
        assert not gpu(registered, 1).quarantined
        assert NodeAuditEntry.objects.filter(node=node, action="node.card_released", actor=admin_user).exists()
        assert CardHealthEvent.objects.filter(card_index=1, kind="released", actor=admin_user).exists()

    def test_releasing_a_healthy_card_or_one_still_failing_is_a_409(self, agent, registered, admin_client):
        node = registered[0]
        assert beat(agent, card1=("failed", [XID_48])).status_code == 200
        healthy = admin_client.post(self.url(node, index=0))
        assert healthy.status_code == 409 and "not quarantined" in str(healthy.json())
        still_failing = admin_client.post(self.url(node))
        assert still_failing.status_code == 409 and "still reports failed" in str(still_failing.json())
        assert gpu(registered, 1).quarantined

    def test_unknown_node_or_card_404_and_tenants_403(self, agent, registered, admin_client, tenant_client):
        node = registered[0]
        assert beat(agent, card1=("failed", [XID_48])).status_code == 200
        assert beat(agent).status_code == 200
        assert admin_client.post(f"/api/v1/nodes/{node.id + 999}/cards/nvidia/1/release").status_code == 404
        assert admin_client.post(self.url(node, index=9)).status_code == 404
        assert tenant_client.post(self.url(node)).status_code == 403
        assert gpu(registered, 1).quarantined

    def test_auto_release_after_the_set_seconds_of_healthy_reports(self, agent, registered, settings):
        settings.HETEROFLOW_CARD_AUTO_RELEASE = 60
        assert beat(agent, card1=("failed", [XID_48])).status_code == 200
        assert beat(agent).status_code == 200
        assert gpu(registered, 1).quarantined
        GPU.objects.filter(node=registered[0], index=1).update(healthy_since=timezone.now() - timedelta(seconds=61))
        assert beat(agent).status_code == 200
        assert not gpu(registered, 1).quarantined
        assert CardHealthEvent.objects.filter(card_index=1, kind="released", actor=None).exists()

    def test_auto_release_is_off_by_default(self, agent, registered):
        assert beat(agent, card1=("failed", [XID_48])).status_code == 200
        GPU.objects.filter(node=registered[0], index=1).update(healthy_since=timezone.now() - timedelta(days=30))
        assert beat(agent).status_code == 200
        assert gpu(registered, 1).quarantined
