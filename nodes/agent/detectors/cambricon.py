"""Cambricon MLUs via ``cnmon info -m -u -e`` (memory, utilisation and temperature sections of each card)."""

from __future__ import annotations

import re

from .base import Card, CommandRunner, Detector, NumaLookup, fallback_uuid, no_numa, number, optional_number
from .query_blocks import parse_query_blocks

_CARD_START = re.compile(r"Card\s*:?\s*(?P<index>\d+)")


def parse_cnmon_info(text: str, numa_of: NumaLookup = no_numa) -> list[Card]:
    cards = []
    for block in parse_query_blocks(text, _CARD_START):
        bus_id = block.get("bus id", "pci bus id")
        temperature = block.get("temperature/chip", "temperature/board") or ""
        cards.append(Card(
            index=block.index,
            uuid=block.get("uuid") or fallback_uuid("cambricon", block.index, bus_id),
            type="cambricon",
            model=block.require("product name"),
            memory_total_mb=int(number(block.require("physical memory usage/total"))),
            memory_used_mb=int(number(block.require("physical memory usage/used"))),
            utilization=round(optional_number(block.get("mlu average") or "") or 0),
            temperature=round(optional_number(temperature) or 0),
            numa=numa_of(bus_id),
        ))
    return cards


class CambriconDetector(Detector):
    gpu_type = "cambricon"

    def query(self, runner: CommandRunner) -> list[Card]:
        return parse_cnmon_info(runner(["cnmon", "info", "-m", "-u", "-e"]), numa_of=self.numa_lookup)
