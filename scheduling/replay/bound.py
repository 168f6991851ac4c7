"""An upper bound on the allocation any placement of the same arrived tasks could reach (`replay_trace --bound`,
design §15.9): the distance from a policy's figure to the optimum is at most bound − figure.

The optimum is an offline choice of which arrived tasks to place and where, each task whole on one node, every node
within its cards, CPU and memory. Relax it to a linear programme:

- nodes with the same model, cards, CPU and memory form one class c (n_c nodes); tasks with the same GPU demand
  (whole cards k, or a share of one card), CPU, memory and `gpu-model` form one shape s (count m_s);
- y[s, c] ≥ 0 is how many tasks of shape s go to class c, allowed only where one node of c could hold one such task
  (model accepted, k ≤ its cards, CPU and memory within the node's);
- Σ_c y[s, c] ≤ m_s; per class, Σ_s y[s, c] × (GPU, CPU, memory of s) ≤ n_c × (the node's); and per class and
  whole-card size k ≥ 2, Σ y[s, c] over shapes of k cards ≤ n_c × ⌊cards / k⌋ (a node holds at most that many);
- maximise Σ GPU demand × y.

Any real placement gives a feasible y (count what went where; every constraint is a sum of per-node constraints it
satisfies), so the LP's optimum is ≥ the optimum placement's allocation: a true upper bound, not an estimate. It is
solved with SciPy's HiGHS (`scipy.optimize.linprog`). The bound ignores what makes placement hard (cards and CPU are
pooled per class, shards pooled per card), so the gap it shows is an upper limit on what a better policy could gain.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from scheduling.framework.gpu_models import model_matches
from scheduling.replay.trace import MILLI, TraceNode, TracePod

CAPACITY_TOLERANCE = 1e-6


class BoundError(RuntimeError):
    """The solver did not reach an optimum (it should for every input: y = 0 is always feasible)."""


def allocation_bound(nodes: Sequence[TraceNode], pods: Iterable[TracePod]) -> float:
    """The LP upper bound on the % of the cluster's GPUs that placing some of `pods` (the arrived tasks) can hold."""
    classes = Counter((node.model, node.gpus, node.cpu_milli, node.memory_mib) for node in nodes)
    shapes = Counter((pod.gpu_demand_milli, pod.num_gpu if not pod.shared else 0, pod.cpu_milli, pod.memory_mib,
                      pod.gpu_spec) for pod in pods if pod.gpu_demand_milli)
    total_gpus = sum(node.gpus for node in nodes)
    if not shapes or not total_gpus:
        return 0.0
    class_list, shape_list = list(classes), list(shapes)
    columns = [(s, c) for s, shape in enumerate(shape_list) for c, node_class in enumerate(class_list)
               if _fits_one_node(shape, node_class)]
    if not columns:
        return 0.0
    demand = np.array([shape_list[s][0] / MILLI for s, _ in columns])
    rows, cols, values, limits = [], [], [], []

    def constraint(entries: list[tuple[int, float]], limit: float) -> None:
        row = len(limits)
        for column, value in entries:
            rows.append(row)
            cols.append(column)
            values.append(value)
        limits.append(limit)

    by_shape: dict[int, list[int]] = {}
    by_class: dict[int, list[int]] = {}
    for column, (s, c) in enumerate(columns):
        by_shape.setdefault(s, []).append(column)
        by_class.setdefault(c, []).append(column)
    for s, count in enumerate(shapes.values()):
        constraint([(column, 1.0) for column in by_shape.get(s, [])], count)
    for c, node_class in enumerate(class_list):
        count, (_, gpus, cpu, memory) = classes[node_class], node_class
        here = [(column, shape_list[columns[column][0]]) for column in by_class.get(c, [])]
        constraint([(column, shape[0] / MILLI) for column, shape in here], count * gpus)
        constraint([(column, float(shape[2])) for column, shape in here], count * cpu)
        constraint([(column, float(shape[3])) for column, shape in here], count * memory)
        for cards in {shape[1] for _, shape in here if shape[1] >= 2}:
            constraint([(column, 1.0) for column, shape in here if shape[1] == cards], count * (gpus // cards))
    matrix = coo_matrix((values, (rows, cols)), shape=(len(limits), len(columns))).tocsr()
    result = linprog(-demand, A_ub=matrix, b_ub=np.array(limits, float), bounds=(0, None), method="highs")
    if result.status != 0:
        raise BoundError(f"the LP solver stopped: {result.message}")
    return min(100.0, 100.0 * -result.fun / total_gpus)


def _fits_one_node(shape: tuple, node_class: tuple) -> bool:
    _, cards, cpu, memory, spec = shape
    model, gpus, node_cpu, node_memory = node_class
    return (gpus >= max(cards, 1) and cpu <= node_cpu + CAPACITY_TOLERANCE and memory <= node_memory
            and (not spec or model_matches(spec, model)))

