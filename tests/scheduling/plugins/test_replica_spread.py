"""design §17.2: `spread` places an inference group's replicas evenly over nodes, racks or zones — hard (a filter
whose reason is counted in the attempt's summary line) or soft (a score) — and a spread key no node has is a 400."""

import pytest

from scheduling.cycle.run import run_cycle
from scheduling.groups.services import task_group_create
from scheduling.models import PluginConfig, SchedulingAttempt, Task
from tests.factories import make_node

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def binpack():
    """Packing is what would put replicas together: the spread has to win against it."""
    PluginConfig.objects.update_or_create(name="spread", defaults={"enabled": False, "weight": 0})
    PluginConfig.objects.update_or_create(name="binpack", defaults={"enabled": True, "weight": 1})


def _service(tenant, replicas, spread, **fields):
    return task_group_create(tenant=tenant, name="svc", type="inference", world_size=1, gpus_per_worker=1,
                             image="vllm:1", replicas=replicas, spread=spread, **fields)


def _racks_of(group):
    return sorted(Task.objects.filter(group=group, node__isnull=False).values_list("node__rack", flat=True))


@pytest.mark.parametrize("hard", [True, False])
def test_4_replicas_land_on_4_racks(tenant, hard):
    # Two big nodes per rack: packing would put all four replicas on one node.
    for rack in ("r1", "r2", "r3", "r4"):
        make_node(cards=8, rack=rack)
        make_node(cards=8, rack=rack)
    group = _service(tenant, 4, {"across": "rack", "max_skew": 1, "hard": hard})

    run_cycle()

    assert _racks_of(group) == ["r1", "r2", "r3", "r4"]


def test_without_spread_the_same_replicas_share_racks(tenant):
    for rack in ("r1", "r2", "r3", "r4"):
        make_node(cards=8, rack=rack)
    group = task_group_create(tenant=tenant, name="svc", type="inference", world_size=1, gpus_per_worker=1,
                              image="vllm:1", replicas=4)

    run_cycle()

    assert _racks_of(group) == ["r1"] * 4 or len(set(_racks_of(group))) == 1


def test_a_hard_spread_refuses_a_replica_where_the_skew_would_exceed_and_says_why(tenant):
    make_node(cards=8, rack="r1")
    make_node(cards=1, rack="r2")
    group = _service(tenant, 4, {"across": "rack", "max_skew": 1, "hard": True})

    run_cycle()

    # r1 may hold at most one more than r2, whose only card is taken: the fourth replica waits.
    assert _racks_of(group) == ["r1", "r1", "r2"]
    waiting = Task.objects.get(group=group, node__isnull=True)
    attempt = SchedulingAttempt.objects.get(task=waiting)
    assert "SpreadSkew" in attempt.message, attempt.message


def test_a_spread_key_no_node_has_is_a_400_naming_it_and_nothing_is_written(tenant_client):
    make_node(cards=8)  # no rack, no zone
    body = {"name": "svc", "type": "inference", "world_size": 1, "gpus_per_worker": 1, "image": "vllm:1",
            "command": "serve", "replicas": 2, "spread": {"across": "zone"}}
    response = tenant_client.post("/api/v1/task-groups", body, format="json")
    assert response.status_code == 400 and response.json()["field"] == "spread.across", response.content
    assert not Task.objects.exists()
    response = tenant_client.post("/api/v1/task-groups", {**body, "spread": {"across": "node"}}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["spread"] == {"across": "node", "max_skew": 1, "hard": False}
