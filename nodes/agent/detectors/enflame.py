"""Enflame GCUs via ``efsmi -q``, falling back to the default ``efsmi`` table as Enflame's own device plugin reads it.

``efsmi -q`` prints a ``DEV ID n`` block per device, sections of ``Key : Value`` lines whose keys changed between
drivers (``Mem Size``/``Mem Usage`` before ``Total Size``/``Used Size``) and whose nesting depth varies. The
``BAR1``/``BAR2 Mem Info`` sections have a ``Total Size`` too, so keys are read by their full section path. The
model is ``Device Info/Dev Name``; the ``-d TEMP,MEMORY,USAGE,PCIE`` subset leaves that section out, so its cards
have no model.

The default table takes two rows per device (EFSMI 1.2 with ``Dpm``, 1.6/1.7 with ``Lpm``, 1.7 with
``Boot FW VER``)::

    | DEV    NAME                 | Boot FW VER       | BUS-ID      ECC           |
    | TEMP   Lpm   Pwr(Usage/Cap) | Mem      GCU Virt | DUsed       SN            |
    |=============================================================================|
    | 0      Enflame L300         | 40.2.8.3          | 00:2d:00.0  Enable        |
    | 35℃    LP1      68W / 300W  | 147456MiB Disable | 0%          A098Q50610048 |

It shows the memory size but not how much is in use.
"""

from __future__ import annotations

import re

from .base import Card, Detector, fallback_uuid, mebibytes, optional_int
from .query_blocks import DeviceBlock, parse_query_blocks
from .tables import TableLayout, cards_from_table

EFSMI_TABLE = TableLayout(index="dev", model="name", memory="mem", utilization="dused", temperature="temp",
                          bus_id="bus-id")
_DEVICE_START = re.compile(r"DEV ID\s*(?P<label>\d+)")


class EnflameDetector(Detector):
    gpu_type = "enflame"
    commands = (("efsmi", "-q"), ("efsmi",))

    def parse(self, text: str) -> list[Card]:
        if re.search(r"^DEV ID\s*\d+\s*$", text, re.MULTILINE):
            return [self._query_card(block) for block in parse_query_blocks(text, _DEVICE_START)]
        return cards_from_table(text, self.gpu_type, [EFSMI_TABLE], self.numa_lookup)

    def _query_card(self, block: DeviceBlock) -> Card:
        index = int(block.label)
        bus_id = _bus_id(block)
        return Card(
            index=index,
            uuid=fallback_uuid(self.gpu_type, index, bus_id),
            type=self.gpu_type,
            model=block.get("device info/dev name"),
            memory_total_mb=mebibytes(block.get("device mem info/total size", "device mem info/mem size")),
            memory_used_mb=mebibytes(block.get("device mem info/used size", "device mem info/mem usage")),
            utilization=optional_int(block.get("device usage info/gcu usage")),
            temperature=optional_int(block.get("temperature info/gcu temp")),
            numa=self.numa_lookup(bus_id),
        )


def _bus_id(block: DeviceBlock) -> str | None:
    parts = [block.get(f"pcie info/{name}") for name in ("domain", "bus", "dev", "func")]
    if None in parts:
        return None
    domain, bus, device, function = parts
    return f"{domain}:{bus}:{device}.{function}"
