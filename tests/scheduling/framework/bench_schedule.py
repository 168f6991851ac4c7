"""Micro-benchmark of Framework.schedule + reserve + apply_bind, no database:

    .venv/bin/python -m tests.scheduling.framework.bench_schedule 300 2000 [--freeze] [--no-diagnostics]
"""

import gc
import random
import sys
import time

import django

from tests.shared_data import TOPOLOGY_CAPTURES

TYPES = ["nvidia", "ascend", "musa", "hygon", "metax", "enflame", "iluvatar", "biren", "cambricon", "kunlun"]


def main(node_count: int, task_count: int, freeze: bool = False, diagnostics: bool = True) -> None:
    from nodes.agent.topology import TOPOLOGY_LABEL, encode_label, parse_nvidia_smi_topo
    from scheduling.diagnostics import attempt_nodes
    from scheduling.framework.framework import Framework, apply_bind
    from scheduling.plugins import build_plugin_set
    from scheduling.framework.snapshot import SchedulerConfig
    from tests.scheduling.framework.builders import make_node, make_snapshot, make_task

    dgx = encode_label(parse_nvidia_smi_topo(
        (TOPOLOGY_CAPTURES / "dgx-a100-8gpu-nv12-10nic.txt").read_text()))
    rng = random.Random(1)
    nodes = []
    for i in range(node_count):
        gpu_type = TYPES[i % 3] if i % 5 else rng.choice(TYPES)
        labels = {TOPOLOGY_LABEL: dgx} if gpu_type == "nvidia" else {}
        if i % 4 == 0:
            labels["rdma"] = "true"
        nodes.append(make_node(gpu_type=gpu_type, cpu_percent=rng.uniform(0, 80), memory_used_mb=rng.randint(0, 4e5),
                               zone=f"z{i % 6}", rack=f"r{i % 40}", status="offline" if i % 50 == 0 else "online",
                               dedicated_tenant_id=7 if i % 97 == 0 else None, labels=labels))
    snapshot = make_snapshot(*nodes)
    tasks = [make_task(tenant_id=rng.randint(1, 5), gpu_type=TYPES[i % 3], gpu_required=rng.choice([0, 1, 1, 2, 4]),
                       gpu_memory_mb=rng.choice([0, 4000]), labels={"zone": f"z{i % 6}"}) for i in range(task_count)]
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
    print(f"{node_count} nodes, {task_count} tasks: {elapsed * 1000 / task_count:.3f} ms/task "
          f"({task_count / elapsed:.0f} tasks/s), {bound} bound, diagnostics: {diagnostics}, gc.freeze: {freeze}")
    if freeze:
        gc.unfreeze()


if __name__ == "__main__":
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heteroflow_site.settings")
    django.setup()
    main(int(sys.argv[1]), int(sys.argv[2]), freeze="--freeze" in sys.argv,
         diagnostics="--no-diagnostics" not in sys.argv)
