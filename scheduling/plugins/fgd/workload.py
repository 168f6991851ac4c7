"""The target workload fgd measures fragmentation against: the popularity of task shapes (Weng et al., ATC'23 §4).

A shape is what a task asks of one node: whole cards, or a shard's memory on one card, the CPU cores, the GPU type
and the `gpu-model` label. Popularity is each shape's share of the tasks counted. Following the paper's simulator,
only the most popular shapes that together cover `coverage` of the tasks are kept (the long tail costs time and
changes nothing), then re-normalised.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from scheduling.framework.snapshot import TaskInfo

DEFAULT_COVERAGE = 0.95


@dataclass(frozen=True, order=True)
class Shape:
    cards: int = 0            # whole cards
    shard_mb: int = 0         # a shard's memory on one card (cards == 0); both 0: a task without GPU
    cpu: float = 0.0          # cores
    gpu_type: str = ""
    models: str = ""          # the `gpu-model` label value, "" for any

    @classmethod
    def of(cls, task: TaskInfo) -> Shape:
        from scheduling.framework.gpu_models import MODEL_LABEL

        return cls(cards=task.gpu_required, shard_mb=0 if task.gpu_required else task.gpu_memory_mb,
                   cpu=float(task.cpu_cores), gpu_type=task.gpu_type,
                   models=str(task.labels.get(MODEL_LABEL, "")).strip())

    @property
    def uses_gpu(self) -> bool:
        return self.cards > 0 or self.shard_mb > 0

    def label(self) -> str:
        gpu = f"{self.cards}×card" if self.cards else (f"{self.shard_mb} MB shard" if self.shard_mb else "no GPU")
        extra = "".join(f" {part}" for part in (self.gpu_type, self.models) if part)
        return f"{gpu}, {self.cpu:g} CPU{extra}"


@dataclass(frozen=True)
class TargetWorkload:
    shapes: tuple[Shape, ...]
    popularity: tuple[float, ...]     # same order, sums to 1
    counted: int = 0                  # tasks the popularity was counted over

    @classmethod
    def from_shapes(cls, shapes: Iterable[Shape], *, coverage: float = DEFAULT_COVERAGE) -> TargetWorkload:
        counts = Counter(shapes)
        total = sum(counts.values())
        if not total:
            return cls((), (), 0)
        # Most popular first; equal counts in shape order, so the same tasks always give the same workload.
        ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        kept, covered = [], 0
        for shape, count in ranked:
            kept.append((shape, count))
            covered += count
            if covered >= coverage * total:
                break
        return cls(tuple(shape for shape, _ in kept), tuple(count / covered for _, count in kept), total)

    @classmethod
    def from_tasks(cls, tasks: Iterable[TaskInfo], *, coverage: float = DEFAULT_COVERAGE) -> TargetWorkload:
        return cls.from_shapes((Shape.of(task) for task in tasks), coverage=coverage)

    def __bool__(self) -> bool:
        return bool(self.shapes)

    def weights(self) -> np.ndarray:
        return np.array(self.popularity, float)
