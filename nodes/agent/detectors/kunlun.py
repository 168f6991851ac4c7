"""Kunlunxin XPUs via ``xpu-smi -m``, the machine-readable one-line-per-device listing.

Fields are whitespace separated; the positions below are the ones public tooling reads (SwanLab's Kunlunxin
collector, FlagPerf's memory-capacity probe): 1 device id, 4 temperature (C), 17 memory used and 18 memory
total (MiB), 19 utilisation (%), 21 onwards the model in parentheses. Field 0 is taken as the PCI address
(for the NUMA node) only when it reads as one.
"""

from __future__ import annotations

from .base import Card, CommandRunner, Detector, NumaLookup, canonical_bus_id, fallback_uuid, no_numa, number

_MIN_FIELDS = 22


def parse_xpu_smi_machine(text: str, numa_of: NumaLookup = no_numa) -> list[Card]:
    cards = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < _MIN_FIELDS or not fields[1].isdigit():
            continue
        index = int(fields[1])
        bus_id = fields[0] if canonical_bus_id(fields[0]) else None
        cards.append(Card(
            index=index,
            uuid=fallback_uuid("kunlun", index, bus_id),
            type="kunlun",
            model=_parenthesised(fields[21:]),
            memory_total_mb=int(number(fields[18])),
            memory_used_mb=int(number(fields[17])),
            utilization=int(number(fields[19])),
            temperature=int(number(fields[4])),
            numa=numa_of(bus_id),
        ))
    return cards


class KunlunDetector(Detector):
    gpu_type = "kunlun"

    def query(self, runner: CommandRunner) -> list[Card]:
        return parse_xpu_smi_machine(runner(["xpu-smi", "-m"]), numa_of=self.numa_lookup)


def _parenthesised(fields: list[str]) -> str:
    """``["(R200", "8F)", "..."]`` -> ``"R200 8F"``: the words up to the closing parenthesis."""
    words = []
    for word in fields:
        words.append(word)
        if word.endswith(")"):
            break
    return " ".join(words).strip("()")
