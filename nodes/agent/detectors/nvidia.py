"""NVIDIA cards via ``nvidia-smi --query-gpu``; the parser also serves nvidia-smi-compatible CLIs (ixsmi)."""

from __future__ import annotations

import csv
from collections.abc import Sequence

from .base import Card, Detector, NumaLookup, fallback_uuid, mebibytes, no_numa, number, optional_int

QUERY_FIELDS = (
    "index", "uuid", "name", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu", "pci.bus_id",
)


def parse_query_gpu_csv(text: str, gpu_type: str, fields: Sequence[str] = QUERY_FIELDS,
                        numa_of: NumaLookup = no_numa) -> list[Card]:
    """Parse ``--query-gpu`` CSV output.

    A header line (``index, uuid, name, memory.total [MiB], ...``, printed without ``noheader``) replaces
    ``fields``; units (``MiB``, ``%``, ``C``) are tolerated so ``nounits`` is optional; ``[N/A]`` and
    ``[Not Supported]`` readings are unknown (``None``) except the memory size, which a usable card always reports.
    """
    rows = [row for row in csv.reader(text.splitlines(), skipinitialspace=True) if row]
    if rows and rows[0][0].strip().lower().startswith("index"):
        fields = [cell.split("[")[0].strip() for cell in rows[0]]
        rows = rows[1:]
    cards = []
    for row in rows:
        if len(row) != len(fields):
            raise ValueError(f"expected {len(fields)} fields {list(fields)}, got {row}")
        value = dict(zip(fields, (cell.strip() for cell in row), strict=True))
        index = int(value["index"])
        bus_id = value.get("pci.bus_id")
        cards.append(Card(
            index=index,
            uuid=value.get("uuid") or fallback_uuid(gpu_type, index, bus_id),
            type=gpu_type,
            model=value["name"],
            memory_total_mb=int(number(value["memory.total"])),
            memory_used_mb=mebibytes(value.get("memory.used")),
            utilization=optional_int(value.get("utilization.gpu")),
            temperature=optional_int(value.get("temperature.gpu")),
            numa=numa_of(bus_id),
        ))
    return cards


def query_gpu_command(executable: str) -> tuple[str, ...]:
    return (executable, f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits")


class NvidiaSmiCompatibleDetector(Detector):
    """Any CLI that implements nvidia-smi's ``--query-gpu``/``--format=csv`` interface."""

    def parse(self, text: str) -> list[Card]:
        return parse_query_gpu_csv(text, self.gpu_type, numa_of=self.numa_lookup)


class NvidiaDetector(NvidiaSmiCompatibleDetector):
    gpu_type = "nvidia"
    commands = (query_gpu_command("nvidia-smi"),)
