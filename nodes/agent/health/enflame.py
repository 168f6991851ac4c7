"""Enflame GCU health from `efsmi -q`: `Health : False` → failed; a non-zero `Error Records` / `Error Details`
counter (resets, DRAM/HBM, PCIe, firmware errors) → degraded. Only healthy captures are published (`Health True`,
all counters 0)."""

from __future__ import annotations

import re

from nodes.agent.detectors.query_blocks import parse_query_blocks

from .base import DEGRADED, FAILED, CardFinding, HealthReader, HealthReport, count

_DEVICE_START = re.compile(r"DEV ID\s*(?P<label>\d+)")
# Counted resets an operator asked for are no fault.
_NOT_FAULTS = {"error records/reset count", "error details/user triggered reset"}


class EnflameHealthReader(HealthReader):
    gpu_type = "enflame"
    commands = (("efsmi", "-q"),)

    def parse(self, text: str) -> HealthReport:
        blocks = parse_query_blocks(text, _DEVICE_START)
        if not any(block.get("device info/health") for block in blocks):
            raise ValueError("no Health field in efsmi -q output")
        cards = []
        for block in blocks:
            finding = CardFinding()
            if (block.get("device info/health") or "").lower() == "false":
                finding.note(FAILED, "health-false", "efsmi reports Health False")
            for key, value in block.values.items():
                if key.startswith(("error records/", "error details/")) and key not in _NOT_FAULTS and count(value):
                    name = key.split("/", 1)[1]
                    finding.note(DEGRADED, name.replace(" ", "-"), f"efsmi: {name} {count(value)}")
            cards.append(finding.card(int(block.label)))
        return HealthReport(tuple(cards))
