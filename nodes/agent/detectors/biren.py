"""Biren GPUs via ``brsmi``, the default table (BR-SMI 1.11), three rows per GPU::

    |   GPU                 Name |                Bus-Id |    Volatile Uncorr. ECC |
    |  Temp  Perf  Pwr:Usage/Cap |          Memory-Usage |    GPU-Util  Compute M. |
    |              Persistence-M |                       |                  SVI M. |
    +============================+=======================+=========================+
    |     0            Biren106B |      00000000:90:00.0 |                       0 |
    |    30    P0     35W / 300W |       0MiB / 32512MiB |          0%     Default |
    |                        Off |                       |                Disabled |

The temperature has no unit. The table is the only brsmi output real machines have been seen printing; nothing
published shows what ``brsmi -q`` or ``brsmi gpu --query-gpu`` print, so they are not relied on.
"""

from __future__ import annotations

from .base import Card, Detector
from .tables import TableLayout, cards_from_table

BRSMI_TABLE = TableLayout(index="gpu", model="name", memory="memory-usage", utilization="gpu-util",
                          temperature="temp", bus_id="bus-id")


class BirenDetector(Detector):
    gpu_type = "biren"
    commands = (("brsmi",),)

    def parse(self, text: str) -> list[Card]:
        return cards_from_table(text, self.gpu_type, [BRSMI_TABLE], self.numa_lookup)
