"""Biren GPUs via ``brsmi -q`` (per-GPU ``GPU n`` blocks of ``Key : Value`` lines, after nvidia-smi -q)."""

from __future__ import annotations

import re

from .base import Card, CommandRunner, Detector, NumaLookup, fallback_uuid, no_numa, number, optional_number
from .query_blocks import parse_query_blocks

_GPU_START = re.compile(r"GPU\s*:?\s*(?P<index>\d+)")


def parse_brsmi_query(text: str, numa_of: NumaLookup = no_numa) -> list[Card]:
    cards = []
    for block in parse_query_blocks(text, _GPU_START):
        bus_id = block.get("bus id", "bus")
        cards.append(Card(
            index=block.index,
            uuid=block.get("gpu uuid", "uuid") or fallback_uuid("biren", block.index, bus_id),
            type="biren",
            model=block.require("product name", "name"),
            memory_total_mb=int(number(block.require("memory usage/total", "total"))),
            memory_used_mb=int(number(block.require("memory usage/used", "used"))),
            utilization=round(optional_number(block.get("utilization/gpu", "gpu util") or "") or 0),
            temperature=round(optional_number(block.get("gpu current temp", "temperature/gpu") or "") or 0),
            numa=numa_of(bus_id),
        ))
    return cards


class BirenDetector(Detector):
    gpu_type = "biren"

    def query(self, runner: CommandRunner) -> list[Card]:
        return parse_brsmi_query(runner(["brsmi", "-q"]), numa_of=self.numa_lookup)
