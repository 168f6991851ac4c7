"""Two scheduler instances binding competing gangs at once, with real threads against PostgreSQL."""

import random
import threading

import pytest
from django.db import connection

from nodes.models import Node
from scheduling import lifecycle
from scheduling.framework import reasons
from scheduling.framework.framework import Framework
from scheduling.plugins import build_plugin_set
from scheduling.framework.snapshot import SchedulerConfig
from scheduling.groups.gang import GangPlan, GroupInfo, plan_gang
from scheduling.groups.gang_bind import bind_gang
from scheduling.groups.services import task_group_create
from scheduling.models import Task
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, task_info_from_row
from tests.factories import make_node


def _plan(group, framework) -> GangPlan:
    rows = Task.objects.filter(group=group).order_by("rank").values_list(*TASK_INFO_FIELDS)
    info = GroupInfo(id=group.id, tenant_id=group.tenant_id, name=group.name, world_size=group.world_size,
                     gpus_per_worker=group.gpus_per_worker, parallelism=group.parallelism)
    # Each instance plans on its own snapshot, both taken before either binds: both see every card free.
    plan = plan_gang(info, [task_info_from_row(row) for row in rows], build_snapshot(), framework, random.Random(1))
    assert isinstance(plan, GangPlan)
    return plan


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("round_", range(3))
def test_two_gangs_racing_for_the_same_nodes_bind_one_whole_and_hold_nothing_of_the_other(tenant, round_):
    make_node(name="p", rack="r1", internal_ip="10.0.0.1/24")
    make_node(name="q", rack="r1", internal_ip="10.0.0.2/24")
    groups = [task_group_create(tenant=tenant, name=f"g{i}", type="training", world_size=12, gpus_per_worker=1)
              for i in range(2)]
    framework = Framework(build_plugin_set([]), SchedulerConfig.from_settings())
    plans = [_plan(group, framework) for group in groups]
    start = threading.Barrier(2)
    outcomes = [None, None]

    def instance(position: int) -> None:
        try:
            start.wait()
            outcomes[position] = bind_gang(plans[position], config=framework.config)
        finally:
            connection.close()

    threads = [threading.Thread(target=instance, args=(position,)) for position in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(outcome.bound for outcome in outcomes) == [False, True]
    loser = next(outcome for outcome in outcomes if not outcome.bound)
    assert loser.code in (reasons.INSUFFICIENT_RESOURCES, reasons.BIND_CONFLICT)
    statuses = {group.name: set(group.members.values_list("status", flat=True)) for group in groups}
    assert sorted(map(sorted, statuses.values())) == [[lifecycle.PENDING], [lifecycle.SCHEDULED]]
    assert sum(Node.objects.values_list("gpu_used", flat=True)) == 12
    held = Task.objects.filter(status=lifecycle.SCHEDULED).values_list("node_id", "gpus")
    assert len({(node_id, card) for node_id, gpus in held for card in gpus}) == 12
