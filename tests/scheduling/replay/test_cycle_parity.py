"""The replay and the production cycle share `Framework.schedule` and the card choice: the same 200 tasks on the
same nodes land on the same nodes and cards, whether replayed in memory or bound by a real cycle on PostgreSQL."""

import random
from dataclasses import replace
from itertools import islice

import pytest

from nodes.models import GPU, Node
from scheduling.cycle.run import run_cycle
from scheduling.models import Task
from scheduling.plugins.fgd.workload import TargetWorkload
from scheduling.replay.simulate import POLICIES, TraceReplay
from scheduling.replay.trace import CARD_MB, GPU_TYPE
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, task_info_from_row
from tests.factories import make_task
from tests.scheduling.replay.test_simulate import NODES, PODS

TASKS = 200
SEED = 11
# The replay's configuration (no memory reserve, no load thresholds), as the cycle reads it from settings.
REPLAY_SCHEDULER = {"gpu_reserve_fixed_mb": 0, "gpu_reserve_percent": 0,
                    "load_thresholds": {"cpu_percent": 100, "memory_percent": 100}}


@pytest.mark.django_db
@pytest.mark.parametrize("policy", ["spread", "fgd"])
def test_replay_and_cycle_place_200_tasks_identically(policy, tenant, settings, fgd_window):
    settings.SCHEDULER = {**settings.SCHEDULER, **REPLAY_SCHEDULER,
                          "load_thresholds": {**settings.SCHEDULER["load_thresholds"],
                                              **REPLAY_SCHEDULER["load_thresholds"]}}
    nodes = NODES[::2]
    # CPU and memory left out: the cycle leaves them to bind's load re-check, which a fresh cluster passes.
    pods = [replace(pod, cpu_milli=0, memory_mib=0) for pod in PODS]
    arriving = list(islice(TraceReplay(nodes, pods, policy=policy, seed=SEED).tasks(), TASKS))
    # The cycle's fgd measures against the recent-task window, which will hold exactly these tasks.
    workload = TargetWorkload.from_tasks(arrival.task for arrival in arriving)
    replay = TraceReplay(nodes, pods, policy=policy, seed=SEED, workload=workload)
    result = replay.run(arriving)

    for node in nodes:
        row = Node.objects.create(name=node.name, gpu_type=GPU_TYPE, gpu_total=node.gpus, status="online",
                                  cpu_cores=node.cpu_milli // 1000, memory_gb=node.memory_mib // 1024)
        GPU.objects.bulk_create(GPU(node=row, index=index, uuid=f"{node.name}-{index}", type=GPU_TYPE,
                                    model=node.model, memory_total_mb=CARD_MB) for index in range(node.gpus))
    created = []
    for task in (arrival.task for arrival in arriving):
        created.append(make_task(tenant=tenant, name=task.name, gpu_required=task.gpu_required,
                                 gpu_memory_mb=task.gpu_memory_mb, labels=task.labels).id)
    for task in task_infos(created):
        fgd_window(task)

    cycle = run_cycle(rng=random.Random(SEED), plugin_settings=list(POLICIES[policy]))

    assert cycle.considered == TASKS
    names = {node.id: node.name for node in replay.snapshot.nodes}
    replayed = {task.id: (names[node_id], sorted(cards)) for task, node_id, cards in replay.placements}
    bound = {}
    for position, task in enumerate(Task.objects.filter(id__in=created).select_related("node").order_by("id")):
        if task.node_id is not None:
            cards = [task.shard["card"]] if task.shard else sorted(task.gpus or [])
            bound[position + 1] = (task.node.name, cards)
    assert bound == replayed
    assert cycle.bound == len(replayed) == TASKS - result.failed_tasks
    assert result.failed_tasks > 0, "the subset must overflow so failures are compared too"


def task_infos(task_ids):
    rows = Task.objects.filter(id__in=task_ids).order_by("id").values_list(*TASK_INFO_FIELDS)
    return [task_info_from_row(row) for row in rows]
