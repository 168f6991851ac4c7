"""Moore Threads GPUs via ``mthreads-gmi``.

Each card is a block of three lines under the header; the first carries id, name, PCI address, utilisation and
``used(total)`` memory, the second the temperature in its third column::

    0    MTT S4000            |00000000:08:00.0    |0%    0MiB(49152MiB)
         Physical      N/A    |16x(16x)            |44C   YES
"""

from __future__ import annotations

import re

from .base import Card, Detector, NumaLookup, fallback_uuid, no_numa, number

_CARD_LINE = re.compile(
    r"^(?P<index>\d+)\s+(?P<name>.+?)\s*\|\s*(?P<bus>\S+)\s*\|\s*(?P<util>\d+)%\s+"
    r"(?P<used>\d+)MiB\((?P<total>\d+)MiB\)"
)


def parse_mthreads_gmi(text: str, numa_of: NumaLookup = no_numa) -> list[Card]:
    lines = text.splitlines()
    cards = []
    for position, line in enumerate(lines):
        match = _CARD_LINE.match(line.strip())
        if match is None:
            continue
        detail = lines[position + 1].split("|")
        index = int(match["index"])
        cards.append(Card(
            index=index,
            uuid=fallback_uuid("musa", index, match["bus"]),
            type="musa",
            model=match["name"],
            memory_total_mb=int(match["total"]),
            memory_used_mb=int(match["used"]),
            utilization=int(match["util"]),
            temperature=int(number(detail[2].split()[0])),
            numa=numa_of(match["bus"]),
        ))
    return cards


class MusaDetector(Detector):
    gpu_type = "musa"
    commands = (("mthreads-gmi",),)

    def parse(self, text: str) -> list[Card]:
        return parse_mthreads_gmi(text, numa_of=self.numa_lookup)
