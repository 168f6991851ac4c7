"""Reading a trace in the openb format (data/traces/openb/README.md) into HeteroFlow nodes and tasks.

Mapping (the README's): a node gets `gpu` cards of its `model`, its CPU cores and memory; a pod becomes a task with
`gpu_required = num_gpu`, or for `num_gpu == 1` and `gpu_milli < 1000` a fractional task asking that share of one
card's memory; `gpu_spec` becomes the `gpu-model` label. Cards carry `CARD_MB` of memory and the replay runs with
no memory reserve, so a share of `gpu_milli` thousandths is exactly `gpu_milli × CARD_MB / 1000` MB.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

from scheduling.framework.snapshot import CardInfo, NodeInfo, TaskInfo
from scheduling.framework.gpu_models import MODEL_LABEL

CARD_MB = 1000
MILLI = 1000
GPU_TYPE = "nvidia"
TENANT_ID = 1


class TraceError(ValueError):
    """A trace file that cannot be read: the message names the file, line and column."""


@dataclass(frozen=True)
class TraceNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class TracePod:
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: str = ""
    # Seconds, when the trace has them (the dynamic replay needs them; `read_pod_times`).
    creation_time: int | None = None
    deletion_time: int | None = None

    @property
    def shared(self) -> bool:
        return self.num_gpu == 1 and 0 < self.gpu_milli < MILLI

    @property
    def gpu_demand_milli(self) -> int:
        """What the pod adds to the arrived GPU demand: whole cards, or its share of one card."""
        return self.gpu_milli if self.shared else self.num_gpu * MILLI


def _rows(path: Path, required: tuple[str, ...]):
    try:
        handle = path.open(newline="")
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror}") from exc
    with handle:
        reader = csv.DictReader(handle)
        missing = [column for column in required if column not in (reader.fieldnames or ())]
        if missing:
            raise TraceError(f"{path}: missing column(s) {', '.join(missing)}")
        for line, row in enumerate(reader, start=2):
            yield line, row


def _int(path: Path, line: int, row: dict, column: str) -> int:
    try:
        value = int(row[column])
    except (TypeError, ValueError) as exc:
        raise TraceError(f"{path}:{line}: {column} must be a whole number, not {row[column]!r}") from exc
    if value < 0:
        raise TraceError(f"{path}:{line}: {column} must not be negative")
    return value


def read_nodes(path: Path) -> list[TraceNode]:
    nodes = [TraceNode(row["sn"], _int(path, line, row, "cpu_milli"), _int(path, line, row, "memory_mib"),
                       _int(path, line, row, "gpu"), row["model"].strip())
             for line, row in _rows(path, ("sn", "cpu_milli", "memory_mib", "gpu", "model"))]
    if not nodes:
        raise TraceError(f"{path}: no nodes")
    return nodes


def read_pods(path: Path) -> list[TracePod]:
    pods = []
    for line, row in _rows(path, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")):
        pod = TracePod(row["name"], _int(path, line, row, "cpu_milli"), _int(path, line, row, "memory_mib"),
                       _int(path, line, row, "num_gpu"), _int(path, line, row, "gpu_milli"),
                       (row.get("gpu_spec") or "").strip())
        if pod.gpu_milli > MILLI or (pod.num_gpu > 1 and pod.gpu_milli not in (0, MILLI)):
            raise TraceError(f"{path}:{line}: gpu_milli {pod.gpu_milli} with num_gpu {pod.num_gpu}")
        pods.append(pod)
    if not pods:
        raise TraceError(f"{path}: no pods")
    return pods


def read_pod_times(path: Path) -> list[TracePod]:
    """The pods with their `creation_time` and `deletion_time` (seconds), for a replay with departures."""
    pods = read_pods(path)
    timed = []
    for (line, row), pod in zip(_rows(path, ("creation_time", "deletion_time")), pods):
        created, deleted = _int(path, line, row, "creation_time"), _int(path, line, row, "deletion_time")
        if deleted < created:
            raise TraceError(f"{path}:{line}: deletion_time {deleted} is before creation_time {created}")
        timed.append(replace(pod, creation_time=created, deletion_time=deleted))
    return timed


def to_node(node: TraceNode, node_id: int) -> NodeInfo:
    return NodeInfo(
        id=node_id, name=node.name, gpu_type=GPU_TYPE, gpu_total=node.gpus, cpu_cores=node.cpu_milli // MILLI,
        memory_gb=node.memory_mib // 1024,
        cards=[CardInfo(index=index, type=GPU_TYPE, model=node.model, memory_total_mb=CARD_MB)
               for index in range(node.gpus)],
    )


def to_task(pod: TracePod, task_id: int) -> TaskInfo:
    labels = {MODEL_LABEL: pod.gpu_spec} if pod.gpu_spec else {}
    if pod.shared:
        return TaskInfo(id=task_id, tenant_id=TENANT_ID, name=pod.name, gpu_memory_mb=pod.gpu_milli * CARD_MB // MILLI,
                        cpu_cores=pod.cpu_milli / MILLI, memory_mb=pod.memory_mib, labels=labels)
    return TaskInfo(id=task_id, tenant_id=TENANT_ID, name=pod.name, gpu_required=pod.num_gpu,
                    cpu_cores=pod.cpu_milli / MILLI, memory_mb=pod.memory_mib, labels=labels)
