"""Nodes with cards of several vendors (design §15.3): each vendor numbers its cards from 0."""

import pytest

from nodes.models import GPU, Node
from scheduling.services.task_transition import task_transition
from tests.factories import make_task
from tests.nodes.conftest import card, heartbeat_body

HEARTBEAT = "/api/v1/agent/heartbeat"


def mixed_cards() -> list[dict]:
    return [card(0, uuid="GPU-nv-0"), card(1, uuid="GPU-nv-1"),
            card(0, uuid="NPU-asc-0", type="ascend", model="Ascend910B", memory_total_mb=65536),
            card(1, uuid="NPU-asc-1", type="ascend", model="Ascend910B", memory_total_mb=65536)]


def test_two_nvidia_and_two_ascend_cards_come_online_as_four_cards(agent, registered):
    node, _ = registered
    response = agent.post(HEARTBEAT, heartbeat_body(gpus=mixed_cards()), format="json")

    assert response.status_code == 200, response.json()
    node.refresh_from_db()
    assert (node.status, node.gpu_total) == ("online", 4)
    assert sorted(GPU.objects.filter(node=node).values_list("type", "index", "uuid")) == [
        ("ascend", 0, "NPU-asc-0"), ("ascend", 1, "NPU-asc-1"), ("nvidia", 0, "GPU-nv-0"), ("nvidia", 1, "GPU-nv-1")]


def test_a_card_leaving_takes_only_its_own_type_and_index(agent, registered):
    node, _ = registered
    agent.post(HEARTBEAT, heartbeat_body(gpus=mixed_cards()), format="json")
    kept = GPU.objects.get(node=node, type="nvidia", index=1).id

    without_ascend_1 = [body for body in mixed_cards() if (body["type"], body["index"]) != ("ascend", 1)]
    assert agent.post(HEARTBEAT, heartbeat_body(gpus=without_ascend_1), format="json").status_code == 200

    assert sorted(GPU.objects.filter(node=node).values_list("type", "index")) == [
        ("ascend", 0), ("nvidia", 0), ("nvidia", 1)]
    assert GPU.objects.get(node=node, type="nvidia", index=1).id == kept
    assert Node.objects.get(id=node.id).gpu_total == 3


@pytest.mark.parametrize(("duplicate", "field", "message"), [
    (card(1, uuid="GPU-other"), "gpus[4].index", "nvidia card index 1 reported twice"),
    (card(5, uuid="NPU-asc-0", type="ascend"), "gpus[4].uuid", "card uuid NPU-asc-0 reported twice"),
])
def test_the_same_card_twice_is_400_naming_it_and_changes_nothing(agent, registered, duplicate, field, message):
    node, _ = registered
    response = agent.post(HEARTBEAT, heartbeat_body(gpus=[*mixed_cards(), duplicate]), format="json")

    assert response.status_code == 400
    assert response.json()["errors"][field] == [message]
    node.refresh_from_db()
    assert (node.status, node.gpu_total, GPU.objects.filter(node=node).count()) == ("offline", 0, 0)


def test_the_node_api_and_page_show_each_type_and_whose_cards_a_task_holds(agent, registered, admin_client,
                                                                           tenant):
    node, _ = registered
    agent.post(HEARTBEAT, heartbeat_body(gpus=mixed_cards()), format="json")
    ascend_task = make_task(tenant=tenant, name="on-ascend", gpu_type="ascend", gpu_required=1)
    assert task_transition(ascend_task.id, "pending", "scheduled", node=node, gpus=[1])

    detail = admin_client.get(f"/api/v1/nodes/{node.id}").json()

    assert detail["card_types"] == [{"type": "ascend", "total": 2}, {"type": "nvidia", "total": 2}]
    holders = {(entry["type"], entry["index"]): [task["name"] for task in entry["active_tasks"]]
               for entry in detail["cards"]}
    assert holders == {("ascend", 0): [], ("ascend", 1): ["on-ascend"], ("nvidia", 0): [], ("nvidia", 1): []}


def test_the_node_list_finds_a_mixed_node_under_each_of_its_types(agent, registered, admin_client):
    node, _ = registered
    agent.post(HEARTBEAT, heartbeat_body(gpus=mixed_cards()), format="json")
    for gpu_type in ("nvidia", "ascend"):
        listed = admin_client.get(f"/api/v1/nodes?gpu_type={gpu_type}").json()
        assert [entry["name"] for entry in listed] == [node.name]
    assert admin_client.get("/api/v1/nodes?gpu_type=musa").json() == []


def test_a_task_without_gpu_type_is_shown_on_the_cards_of_the_type_bind_chose(agent, registered, admin_client,
                                                                             tenant):
    node, _ = registered
    agent.post(HEARTBEAT, heartbeat_body(gpus=mixed_cards()), format="json")
    node.refresh_from_db()
    chosen = "nvidia" if node.gpu_type == "ascend" else "ascend"
    other = "ascend" if chosen == "nvidia" else "nvidia"
    any_type = make_task(tenant=tenant, name="any-type", gpu_required=1)
    assert task_transition(any_type.id, "pending", "scheduled", node=node, gpus=[0], card_type=chosen)

    detail = admin_client.get(f"/api/v1/nodes/{node.id}").json()

    holders = {(entry["type"], entry["index"]): [task["name"] for task in entry["active_tasks"]]
               for entry in detail["cards"]}
    assert holders[(chosen, 0)] == ["any-type"] and holders[(other, 0)] == []
