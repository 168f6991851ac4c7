from scheduling.cycle import run_cycle
from tests.factories import make_node, make_task
from tests.scheduling.preemption.conftest import placed_task, statuses


def test_smoke(db, tenant, running_stage):
    node = make_node(cards=8)
    low = placed_task(tenant=tenant, node=node, gpus=[0, 1, 2, 3], priority=10)
    mid = placed_task(tenant=tenant, node=node, gpus=[4, 5], priority=20)
    top = placed_task(tenant=tenant, node=node, gpus=[6, 7], priority=30)
    urgent = make_task(tenant=tenant, priority=90, gpu_required=4)
    result = run_cycle()
    print(result)
    print(statuses(low, mid, top, urgent))
    urgent.refresh_from_db()
    print(urgent.attempt.code, urgent.attempt.message, urgent.attempt.extra)
