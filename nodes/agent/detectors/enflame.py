"""Enflame GCUs via ``efsmi -q`` (per-device ``DEV ID n`` blocks of ``Key : Value`` lines)."""

from __future__ import annotations

import re

from .base import Card, CommandRunner, Detector, NumaLookup, fallback_uuid, no_numa, number, optional_number
from .query_blocks import parse_query_blocks

_DEVICE_START = re.compile(r"DEV\s*ID\s*:?\s*(?P<index>\d+)")


def parse_efsmi_query(text: str, numa_of: NumaLookup = no_numa) -> list[Card]:
    cards = []
    for block in parse_query_blocks(text, _DEVICE_START):
        bus_id = block.get("pcie bus id", "bus id")
        cards.append(Card(
            index=block.index,
            uuid=block.get("uuid", "serial number") or fallback_uuid("enflame", block.index, bus_id),
            type="enflame",
            model=block.require("device name", "dev name"),
            memory_total_mb=int(number(block.require("mem size", "total"))),
            memory_used_mb=int(number(block.require("mem used", "used"))),
            utilization=round(optional_number(block.get("gcu usage", "usage") or "") or 0),
            temperature=round(optional_number(block.get("gcu temperature", "temperature") or "") or 0),
            numa=numa_of(bus_id),
        ))
    return cards


class EnflameDetector(Detector):
    gpu_type = "enflame"

    def query(self, runner: CommandRunner) -> list[Card]:
        return parse_efsmi_query(runner(["efsmi", "-q"]), numa_of=self.numa_lookup)
