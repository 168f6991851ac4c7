"""Reader for ``-q``-style detail output: one block per device, indented ``Key : Value`` lines in sections.

Several vendor CLIs (cnmon info, efsmi -q, brsmi -q, after nvidia-smi -q) print::

    Card 0
        Product Name                   : MLU370-X8
        Physical Memory Usage          :
            Total                      : 24576 MiB
            Used                       : 1005 MiB

which becomes ``{"product name": "MLU370-X8", "physical memory usage/total": "24576 MiB", ...}`` for card 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class DeviceBlock:
    index: int
    values: dict[str, str] = field(default_factory=dict)

    def get(self, *names: str) -> str | None:
        """First value whose path equals, or ends with, one of ``names`` (lower case, ``/`` between sections)."""
        for name in names:
            for path, value in self.values.items():
                if path == name or path.endswith("/" + name):
                    return value
        return None

    def require(self, *names: str) -> str:
        value = self.get(*names)
        if value is None:
            raise KeyError(f"device {self.index}: none of {names} reported")
        return value


def parse_query_blocks(text: str, block_start: re.Pattern[str]) -> list[DeviceBlock]:
    """Split ``text`` into device blocks; ``block_start`` matches a block's first line and has an ``index`` group."""
    blocks: list[DeviceBlock] = []
    sections: list[tuple[int, str]] = []
    for raw_line in text.expandtabs(8).splitlines():
        line = raw_line.strip()
        if not line:
            continue
        if start := block_start.fullmatch(line):
            blocks.append(DeviceBlock(index=int(start["index"])))
            sections = []
            continue
        if not blocks:
            continue
        indent = len(raw_line.expandtabs(8)) - len(raw_line.expandtabs(8).lstrip())
        while sections and sections[-1][0] >= indent:
            sections.pop()
        key, colon, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if not colon or not value:
            sections.append((indent, key))
        else:
            blocks[-1].values["/".join([name for _, name in sections] + [key])] = value
    return blocks
