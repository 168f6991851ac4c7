"""Micro-benchmark of Framework.schedule + reserve + apply_bind over an in-memory snapshot, no database:

    manage.py bench_framework --nodes 300 --tasks 2000 [--freeze] [--no-diagnostics] [--layout spread|fgd]

Without `--layout` the default plugin set (spread) places the original task list, so figures stay comparable with
earlier runs. With `--layout` the tasks also ask for CPU (several sizes per GPU shape, as real tasks do, which fgd's
cache keys on) and the layout plugin is the one named; fgd measures against the tasks' own shapes, so no Redis is
needed.
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
from scheduling.framework.registry import PluginSet, PluginSetting
from scheduling.framework.snapshot import CardInfo, ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo, TenancyView
from scheduling.plugins import build_plugin_set, fgd

# An 8-card A100 node behind NVSwitch, two NUMA nodes: the layout of a DGX A100.
DGX_NODE_MODEL = DEMO_FLEET[0][1]
LAYOUTS = ("spread", fgd.NAME)
CPU_SIZES = (2, 4, 8, 16)   # cores


def make_node(ids, *, gpu_type: str, **fields) -> NodeInfo:
    node_id = next(ids)
    cards = [CardInfo(index=i, uuid=f"gpu-{i}", type=gpu_type, model="A100", memory_total_mb=81920)
             for i in range(8)]
    return NodeInfo(id=node_id, name=f"node-{node_id}", cpu_cores=64, memory_gb=512, gpu_type=gpu_type, gpu_total=8,
                    cards=cards, **fields)


def layout_plugin_set(layout: str | None, tasks: list[TaskInfo]) -> PluginSet:
    """The default plugin set, with `layout` (spread, or fgd with its admin defaults) as the only layout plugin."""
    if layout is None:
        return build_plugin_set([])
    settings = [PluginSetting("spread", layout == "spread", 1), PluginSetting("binpack", False, 0),
                PluginSetting(fgd.NAME, layout == fgd.NAME, 1, fgd.DEFAULTS)]
    plugin_set = build_plugin_set(settings)
    workload = fgd.TargetWorkload.from_tasks(tasks)
    for plugin, _ in plugin_set.scorers:
        if isinstance(plugin, fgd.Fgd):
            plugin.use_workload(workload)
    return plugin_set


def main(node_count: int, task_count: int, freeze: bool = False, diagnostics: bool = True, layout: str | None = None,
         write=print) -> None:
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
    if layout is not None:
        # A generator of its own, so the placements' draws stay those of the run without a layout.
        cpu_rng = random.Random(2)
        for task in tasks:
            task.cpu_cores = float(cpu_rng.choice(CPU_SIZES))
    framework = Framework(layout_plugin_set(layout, tasks), SchedulerConfig())
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
          f"({task_count / elapsed:.0f} tasks/s), {bound} bound, diagnostics: {diagnostics}, gc.freeze: {freeze}"
          + (f", layout: {layout}" if layout is not None else ""))
    if freeze:
        gc.unfreeze()


class Command(BaseCommand):
    help = "Time the scheduling framework alone (filter, score, card choice) over a synthetic in-memory cluster."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=300)
        parser.add_argument("--tasks", type=int, default=2000)
        parser.add_argument("--freeze", action="store_true", help="gc.freeze() the snapshot before timing")
        parser.add_argument("--no-diagnostics", action="store_true", help="skip building each attempt's diagnostics")
        parser.add_argument("--layout", choices=LAYOUTS,
                            help="the layout plugin, with tasks of several CPU sizes (default: spread, no CPU asked)")

    def handle(self, *args, nodes: int, tasks: int, freeze: bool, no_diagnostics: bool, layout: str | None,
               **options):
        main(nodes, tasks, freeze=freeze, diagnostics=not no_diagnostics, layout=layout, write=self.stdout.write)
