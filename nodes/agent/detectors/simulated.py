"""Fabricated cards for the simulated fleet: nodes that heartbeat plausible hardware without having any."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from .base import Card, CommandRunner, Detector


def fake_cards_for(gpu_type: str, model: str, count: int, memory_mb: int,
                   numa_layout: Sequence[int | None] | None = None) -> list[Card]:
    """``count`` idle cards of one model; ``numa_layout`` gives each card's NUMA node (``None``: unknown).

    UUIDs are random, so that many simulated nodes never report the same card twice.
    """
    if numa_layout is not None and len(numa_layout) != count:
        raise ValueError(f"numa_layout has {len(numa_layout)} entries for {count} cards")
    layout = list(numa_layout) if numa_layout is not None else [None] * count
    return [
        Card(index=index, uuid=f"SIM-{uuid.uuid4()}", type=gpu_type, model=model, memory_total_mb=memory_mb,
             memory_used_mb=0, utilization=0, temperature=35, numa=layout[index])
        for index in range(count)
    ]


class SimulatedDetector(Detector):
    """Reports the cards it was given, whatever the host has."""

    gpu_type = "simulated"

    def __init__(self, cards: Iterable[Card]) -> None:
        super().__init__()
        self.cards = list(cards)

    def query(self, runner: CommandRunner) -> list[Card]:
        return list(self.cards)

    def parse(self, text: str) -> list[Card]:
        return list(self.cards)
