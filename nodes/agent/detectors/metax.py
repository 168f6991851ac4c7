"""MetaX GPUs via the ``mx-smi`` summary table.

The table layout changed between mx-smi releases: 2.1/2.2.4 print ``GPU NAME | Bus-id | GPU-Util`` with the GPU
index in front of the name, 2.2.9 and later print ``Board Name | GPU Persist-M | Bus-id | GPU-Util sGPU-M`` with
the board index in front of the name and the GPU index in its own column. The index and name columns are found
through the first header row, so both layouts parse; every card is a pair of rows whose first holds the bus id.
"""

from __future__ import annotations

import re

from .base import Card, Detector, NumaLookup, fallback_uuid, no_numa

_BUS_ID = re.compile(r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
_TEMPERATURE = re.compile(r"\b(\d+)C\b")
_MEMORY = re.compile(r"(\d+)\s*/\s*(\d+)\s*MiB")
_UTILIZATION = re.compile(r"(\d+)%")


def parse_mx_smi(text: str, numa_of: NumaLookup = no_numa) -> list[Card]:
    rows = [_cells(line) for line in text.splitlines() if line.startswith("|") and not line.startswith("|=")]
    header = next((row for row in rows if any("Bus-id" in cell for cell in row)), None)
    if header is None:
        raise ValueError("no mx-smi device table header")
    index_column = next(i for i, cell in enumerate(header) if cell.split()[:1] == ["GPU"])
    name_column = next(i for i, cell in enumerate(header) if "name" in cell.lower())
    util_column = next(i for i, cell in enumerate(header) if "GPU-Util" in cell)

    cards = []
    device_rows = rows[rows.index(header) + 2:]
    for position, row in enumerate(device_rows):
        if any(cell.startswith("Process") for cell in row):
            break
        bus_id = next((cell for cell in row if _BUS_ID.fullmatch(cell)), None)
        if bus_id is None:
            continue
        detail = " | ".join(device_rows[position + 1])
        used, total = _MEMORY.search(detail).groups()
        index = int(row[index_column].split()[0])
        cards.append(Card(
            index=index,
            uuid=fallback_uuid("metax", index, bus_id),
            type="metax",
            model=row[name_column].split(None, 1)[1],
            memory_total_mb=int(total),
            memory_used_mb=int(used),
            utilization=int(_UTILIZATION.search(row[util_column])[1]),
            temperature=int(_TEMPERATURE.search(detail)[1]),
            numa=numa_of(bus_id),
        ))
    return cards


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


class MetaxDetector(Detector):
    gpu_type = "metax"
    commands = (("mx-smi",),)

    def parse(self, text: str) -> list[Card]:
        return parse_mx_smi(text, numa_of=self.numa_lookup)
