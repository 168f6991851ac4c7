"""The node page and list show card health, quarantine and drains; the page releases cards and drains nodes
(design §17.3)."""

import pytest
from django.utils import timezone

from nodes.models import GPU, CardHealthEvent, Node
from scheduling import lifecycle
from scheduling.models import Task
from tests.factories import make_node, make_task
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db
XID_79 = {"code": "xid-79", "message": "GPU has fallen off the bus", "at": None}


def quarantine(node, index, health="failed"):
    GPU.objects.filter(node=node, index=index).update(health=health, last_error=XID_79, quarantined_at=timezone.now(),
                                                      quarantine_reason="xid-79: GPU has fallen off the bus")
    CardHealthEvent.objects.create(node=node, card_type="nvidia", card_index=index, kind="quarantined",
                                   health="failed", errors=[XID_79])


def health_cell(page: str, index: int) -> str:
    row = page.split("<tr")[index + 2]
    return row[row.index('class="card-health"'):]


def test_the_card_table_shows_health_the_last_error_the_quarantine_and_the_history(admin_web):
    node = make_node(cards=3)
    quarantine(node, 1)
    GPU.objects.filter(node=node, index=2).update(health="degraded")
    page = admin_web.get(f"/nodes/{node.id}/").content.decode()
    assert 'data-health="ok"' in health_cell(page, 0) and "quarantined" not in health_cell(page, 0)
    failed = health_cell(page, 1)
    assert "failed" in failed and "quarantined" in failed and "xid-79: GPU has fallen off the bus" in failed
    assert "history" in failed and "Release" in failed and "disabled" in failed
    assert 'data-health="degraded"' in health_cell(page, 2)


def test_the_page_releases_a_quarantined_card_and_refuses_a_healthy_one_beside_the_table(admin_web, admin_user):
    node = make_node(cards=2)
    quarantine(node, 1)
    GPU.objects.filter(node=node, index=1).update(health="ok")
    response = admin_web.post(f"/nodes/{node.id}/", {"form": "release", "card_type": "nvidia", "card_index": "1"},
                              **HTMX)
    assert response.status_code == 200
    assert response.content.decode().lstrip().startswith('<div class="card-body flush table-wrap" id="cards-table"')
    assert "Card released" in response.content.decode()
    assert not GPU.objects.get(node=node, index=1).quarantined
    refused = admin_web.post(f"/nodes/{node.id}/", {"form": "release", "card_type": "nvidia", "card_index": "0"},
                             **HTMX)
    assert refused.status_code == 400 and "not quarantined" in refused.content.decode()


def test_the_page_drains_shows_progress_and_uncordons(admin_web, tenant):
    node = make_node(cards=2)
    make_task(tenant=tenant, status=lifecycle.RUNNING, node=node, gpus=[0], gpu_required=1, card_type="nvidia")
    response = admin_web.post(f"/nodes/{node.id}/", {"form": "drain", "grace_seconds": "20"}, **HTMX)
    fragment = response.content.decode()
    assert response.status_code == 200 and fragment.lstrip().startswith('<div id="drain-panel">')
    assert "Draining" in fragment and "1 of 1 task(s) left" in fragment and "grace 20 s" in fragment
    assert Task.objects.get(node=node).status == lifecycle.PREEMPTING
    listing = admin_web.get("/nodes/").content.decode()
    assert "drain-flag" in listing and "draining" in listing
    back = admin_web.post(f"/nodes/{node.id}/", {"form": "uncordon"}, **HTMX)
    assert back.status_code == 200 and "Uncordoned" in back.content.decode()
    assert Node.objects.get(id=node.id).schedulable


@pytest.mark.parametrize("grace", ["-5", "soon", "86401"])
def test_a_bad_grace_is_refused_beside_the_field_and_nothing_drains(admin_web, grace):
    node = make_node(cards=1)
    response = admin_web.post(f"/nodes/{node.id}/", {"form": "drain", "grace_seconds": grace}, **HTMX)
    assert response.status_code == 400
    assert 'data-field="grace_seconds"' in response.content.decode()
    node.refresh_from_db()
    assert (node.schedulable, node.drain_state) == (True, "")


def test_the_nodes_list_flags_nodes_with_unhealthy_cards(admin_web):
    sick, worn, fine = make_node(name="sick", cards=2), make_node(name="worn", cards=2), make_node(name="fine", cards=2)
    quarantine(sick, 0)
    GPU.objects.filter(node=worn, index=1).update(health="degraded")
    listing = admin_web.get("/nodes/").content.decode()
    rows = {name: listing[listing.index(f"<strong>{name}</strong>"):][:1500] for name in ("sick", "worn", "fine")}
    assert "1 card quarantined" in rows["sick"]
    assert "1 card unhealthy" in rows["worn"]
    assert "unhealthy-flag" not in rows["fine"].split("</tr>")[0]


def test_tenants_cannot_release_or_drain_from_the_page(tenant_web):
    node = make_node(cards=1)
    quarantine(node, 0)
    assert tenant_web.post(f"/nodes/{node.id}/", {"form": "drain"}).status_code in (302, 403)
    assert tenant_web.post(f"/nodes/{node.id}/", {"form": "release", "card_type": "nvidia",
                                                  "card_index": "0"}).status_code in (302, 403)
    node.refresh_from_db()
    assert node.drain_state == "" and GPU.objects.get(node=node).quarantined
