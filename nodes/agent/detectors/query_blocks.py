"""Reader for ``-q``-style detail output: one block per device, indented ``Key : Value`` lines in sections.

Vendor CLIs in nvidia-smi's manner (``efsmi -q``, ``xpu-smi -q``) print::

    DEV ID 0
        PCIe Info
            Bus                     : 0c
        Device Mem Info
            Total Size              : 42976 MiB

which becomes ``{"pcie info/bus": "0c", "device mem info/total size": "42976 MiB"}`` for the block labelled ``0``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class DeviceBlock:
    label: str
    values: dict[str, str] = field(default_factory=dict)

    def get(self, *paths: str) -> str | None:
        """The value at the first of ``paths`` the block has (lower case, ``/`` between sections), else ``None``."""
        return next((self.values[path] for path in paths if path in self.values), None)


def parse_query_blocks(text: str, block_start: re.Pattern[str]) -> list[DeviceBlock]:
    """Split ``text`` into device blocks; ``block_start`` matches a block's first line and has a ``label`` group."""
    blocks: list[DeviceBlock] = []
    sections: list[tuple[int, str]] = []
    for raw_line in text.expandtabs(8).splitlines():
        line = raw_line.strip()
        if not line:
            continue
        if start := block_start.fullmatch(line):
            blocks.append(DeviceBlock(label=start["label"]))
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
