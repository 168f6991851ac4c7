"""Huawei Ascend NPUs via ``npu-smi info``.

Each chip is printed as two table rows::

    | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip  Phy-ID              | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    | 0     Ascend910           | OK            | 162.6       34                0    / 0             |
    | 0     0                   | 0000:9D:00.0  | 0           0    / 0          3419 / 65536         |

Boards with two chips (Ascend910 in 910B-era drivers) print one pair per chip; the device index the runtime and
``ASCEND_VISIBLE_DEVICES`` use is the ``Phy-ID`` when the column exists, else the NPU id (one chip per NPU).
310P-class cards have no HBM column, so the last ``used / total`` pair of the second row is the device memory.
The process table that follows the device table is ignored.
"""

from __future__ import annotations

import re

from .base import Card, Detector, NumaLookup, fallback_uuid, no_numa, number, optional_int

_USED_OF_TOTAL = re.compile(r"(\d+)\s*/\s*(\d+)")
_BUS_ID_CELL = re.compile(r"[0-9A-Fa-fx]{4,8}:[0-9A-Fa-fx]{2}:[0-9A-Fa-fx]{2}\.[0-7]")


def parse_npu_smi_info(text: str, numa_of: NumaLookup = no_numa) -> list[Card]:
    cards: list[Card] = []
    has_phy_id = False
    first_row: list[str] | None = None
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.lstrip().startswith("|") or len(cells) < 3:
            continue
        if "Process id" in line or "Process name" in line:
            break
        if cells[0].startswith("Chip"):
            has_phy_id = "Phy-ID" in cells[0]
            continue
        if _BUS_ID_CELL.fullmatch(cells[1]) and first_row is not None:
            cards.append(_card(first_row, cells, has_phy_id, numa_of))
            first_row = None
        elif cells[0][:1].isdigit():
            first_row = cells
    return cards


def _card(first_row: list[str], second_row: list[str], has_phy_id: bool, numa_of: NumaLookup) -> Card:
    npu_id, name = first_row[0].split(None, 1)
    chip_ids = second_row[0].split()
    index = int(chip_ids[1]) if has_phy_id and len(chip_ids) > 1 else int(npu_id)
    bus_id = second_row[1]
    # Power may read "-" for the second chip of a board; the temperature is the second figure.
    _power, temperature, *_ = first_row[2].split()
    used, total = _USED_OF_TOTAL.findall(second_row[2])[-1]
    return Card(
        index=index,
        uuid=fallback_uuid("ascend", index, bus_id),
        type="ascend",
        model=name.strip(),
        memory_total_mb=int(total),
        memory_used_mb=int(used),
        utilization=optional_int(second_row[2].split()[0]),
        temperature=int(number(temperature)),
        numa=numa_of(bus_id),
    )


class AscendDetector(Detector):
    gpu_type = "ascend"
    commands = (("npu-smi", "info"),)

    def parse(self, text: str) -> list[Card]:
        return parse_npu_smi_info(text, numa_of=self.numa_lookup)
