"""The scheduling cycle hands training groups to the gang path: all members together, never one by one."""

import pytest

from nodes.models import Node
from scheduling.cycle.run import run_cycle
from scheduling.groups.services import task_group_create
from tests.factories import make_node

pytestmark = pytest.mark.django_db


def nodes_in_one_rack(count):
    return [make_node(name=f"n{i}", zone="z1", rack="r1", internal_ip=f"10.0.0.{i + 1}/24") for i in range(count)]


def test_a_cycle_binds_a_whole_training_group_with_ranks_and_a_master(tenant):
    nodes_in_one_rack(2)
    group = task_group_create(tenant=tenant, name="llm", type="training", world_size=16, gpus_per_worker=1)

    result = run_cycle()

    assert result.bound == 16
    members = list(group.members.order_by("rank"))
    assert {member.status for member in members} == {"scheduled"}
    assert len({member.env["MASTER_ADDR"] for member in members}) == 1


def test_a_cycle_holds_nothing_of_a_group_that_does_not_fit(tenant):
    nodes_in_one_rack(3)
    group = task_group_create(tenant=tenant, name="huge", type="training", world_size=32, gpus_per_worker=1)

    result = run_cycle()

    assert result.bound == 0
    assert set(group.members.values_list("status", flat=True)) == {"pending"}
    assert sum(Node.objects.values_list("gpu_used", flat=True)) == 0
    group.refresh_from_db()
    assert group.diagnostics["code"] == "GangIncomplete"
