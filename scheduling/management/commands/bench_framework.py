"""Micro-benchmark of Framework.schedule + reserve + apply_bind over an in-memory snapshot, no database:

    manage.py bench_framework --nodes 300 --tasks 2000 [--freeze] [--no-diagnostics]
"""

import gc
import itertools
import random
import time

from django.core.management.base import BaseCommand

from nodes.agent.topology import TOPOLOGY_LABEL
from nodes.demo_cluster import DEMO_FLEET, topology_label
from nodes.models import GPU_TYPES as TYPES
from scheduling.diagnostics.attempts import attempt_nodes
from scheduling.framework.framework import Framework
from scheduling.framework.occupancy import apply_bind
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo, TenancyView
from scheduling.plugins import build_plugin_set

# An 8-card A100 node behind NVSwitch, two NUMA nodes: the layout of a DGX A100.
DGX_NODE_MODEL = DEMO_FLEET[0][1]


def make_node(ids, *, gpu_type: str, **fields) -> NodeInfo:
    node_id = next(ids)
    cards = [CardInfo(index=i, uuid=f"gpu-{i}", type=gpu_type, model="A100", memory_total_mb=81920)
             for i in range(8)]
    return NodeInfo(id=node_id, name=f"node-{node_id}", cpu_cores=64, memory_gb=512, gpu_type=gpu_type, gpu_total=8,
                    cards=cards, **fields)


def main(node_count: int, task_count: int, freeze: bool = False, diagnostics: bool = True, write=print) -> None:
    dgx = topology_label(DGX_NODE_MODEL)
    ids = itertools.count(1)
    rng = random.Random(1)
    nodes = []
    for i in range(node_count):
        gpu_type = TYPES[i % 3] if i % 5 else rng.choice(TYPES)
        labels = {TOPOLOGY_LABEL: dgx} if gpu_type == "nvidia" else {}
        if i % 4 == 0:
            labels["rdma"] = "true"
        nodes.append(make_node(ids, gpu_type=gpu_type, cpu_percent=rng.uniform(0, 80),
                               memory_used_mb=rng.randint(0, 400_000),
                               zone=f"z{i % 6}", rack=f"r{i % 40}", status="offline" if i % 50 == 0 else "online",
                               dedicated_tenant_id=7 if i % 97 == 0 else None, labels=labels))
    snapshot = ClusterSnapshot(nodes=nodes, tenancy=TenancyView())
    tasks = [TaskInfo(id=next(ids), tenant_id=rng.randint(1, 5), gpu_type=TYPES[i % 3],
                      gpu_required=rng.choice([0, 1, 1, 2, 4]), gpu_memory_mb=rng.choice([0, 4000]),
                      labels={"zone": f"z{i % 6}"}) for i in range(task_count)]
    framework = Framework(build_plugin_set([]), SchedulerConfig())
    if freeze:
        gc.freeze()
    started = time.perf_counter()
    bound = 0
    for task in tasks:
        result = framework.schedule(task, snapshot, rng)
        if result.node is not None:
            cards = framework.reserve(task, result.node, snapshot.tenancy)
            apply_bind(snapshot, task, result.node, cards)
            bound += 1
        if diagnostics:
            attempt_nodes(result)
    elapsed = time.perf_counter() - started
    write(f"{node_count} nodes, {task_count} tasks: {elapsed * 1000 / task_count:.3f} ms/task "
          f"({task_count / elapsed:.0f} tasks/s), {bound} bound, diagnostics: {diagnostics}, gc.freeze: {freeze}")
    if freeze:
        gc.unfreeze()


class Command(BaseCommand):
    help = "Time the scheduling framework alone (filter, score, card choice) over a synthetic in-memory cluster."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=300)
        parser.add_argument("--tasks", type=int, default=2000)
        parser.add_argument("--freeze", action="store_true", help="gc.freeze() the snapshot before timing")
        parser.add_argument("--no-diagnostics", action="store_true", help="skip building each attempt's diagnostics")

    def handle(self, *args, nodes: int, tasks: int, freeze: bool, no_diagnostics: bool, **options):
        main(nodes, tasks, freeze=freeze, diagnostics=not no_diagnostics, write=self.stdout.write)
