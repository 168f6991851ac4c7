"""Cambricon MLUs via ``cnmon``, the default table; CNMON 4.20 and 5.10 print it alike::

    | Card  VF  Name       Firmware |               Bus-Id | Util        Ecc-Error |
    | Fan   Temp      Pwr:Usage/Cap |         Memory-Usage | SR-IOV   Compute-Mode |
    |===============================+======================+=======================|
    | 0     /   MLU370-X8    v1.1.6 |         0000:39:00.0 | 0%                N/A |
    |  0%   32C        106 W/ 250 W |     0 MiB/ 23374 MiB | N/A           Default |

CNMON 4.20 has ``Inited  Driver`` where 5.10 has ``Bus-Id``, so its cards carry no PCI address. The table is the
only cnmon output real machines have been seen printing: the machine-readable ``cnmon info -j`` writes
``cnmon_info.json`` into the working directory instead of stdout, and no real ``cnmon info`` output is published.
"""

from __future__ import annotations

from .base import Card, Detector
from .tables import TableLayout, cards_from_table

CNMON_TABLE = TableLayout(index="card", model="name", memory="memory-usage", utilization="util", temperature="temp",
                          bus_id="bus-id")


class CambriconDetector(Detector):
    gpu_type = "cambricon"
    commands = (("cnmon",),)

    def parse(self, text: str) -> list[Card]:
        return cards_from_table(text, self.gpu_type, [CNMON_TABLE], self.numa_lookup)
