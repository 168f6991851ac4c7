"""Reader for the boxed tables vendor CLIs print in nvidia-smi's manner (cnmon, brsmi, efsmi, XPU-SMI, xpu_smi 4.x).

A table has a header of one or more rows; each device takes as many rows as the header, and every value is read
through the header cell above it::

    | Card  VF  Name       Firmware |               Bus-Id | Util        Ecc-Error |
    | Fan   Temp      Pwr:Usage/Cap |         Memory-Usage | SR-IOV   Compute-Mode |
    |===============================+======================+=======================|
    | 0     /   MLU370-X8    v1.1.6 |         0000:39:00.0 | 0%                N/A |
    |  0%   32C        106 W/ 250 W |     0 MiB/ 23374 MiB | N/A           Default |

Labels within a header cell are separated by two or more spaces (``Compute M.`` is one label). A value belongs to
the label of its cell it overlaps most, or else to the nearest one, so left- or right-aligned columns, widened
columns and added columns all read the same and nothing depends on where a column sits.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import cycle

from .base import Card, NumaLookup, fallback_uuid, optional_int, used_and_total_mb

_LABEL = re.compile(r"\S+(?: \S+)*")  # words joined by single spaces
_WORD = re.compile(r"\S+")

Cell = str
Row = list[Cell]
Device = dict[str, str]
"""One device's values by lower-case header label (``"memory-usage": "0 MiB/ 23374 MiB"``); ``""`` if blank."""


@dataclass(frozen=True)
class TableLayout:
    """Which header labels (lower case) hold a vendor's card fields; the first three also identify the header."""

    index: str
    model: str
    memory: str
    utilization: str
    temperature: str
    bus_id: str

    @property
    def header(self) -> tuple[str, ...]:
        return (self.index, self.model, self.memory)


def read_device_table(text: str, header_labels: Collection[str]) -> list[Device]:
    """The devices of the first table whose header holds all of ``header_labels``; ``ValueError`` if there is none.

    The table ends at the first group of rows that does not have the header's shape (a Processes or VIDEO box).
    """
    groups = _row_groups(text)
    wanted = {label.lower() for label in header_labels}
    header_at = next((position for position, group in enumerate(groups)
                      if wanted <= {label for row in group for cell in row for label, _, _ in _labels(cell)}), None)
    if header_at is None:
        raise ValueError(f"no table header with {sorted(wanted)}")
    header = groups[header_at]
    devices = []
    for group in groups[header_at + 1:]:
        if len(group) % len(header) or any(len(row) != len(head) for row, head in zip(group, cycle(header))):
            break
        for start in range(0, len(group), len(header)):
            devices.append(_device(header, group[start:start + len(header)]))
    return devices


def cards_from_table(text: str, gpu_type: str, layouts: Sequence[TableLayout], numa_of: NumaLookup) -> list[Card]:
    """Cards from the first of ``layouts`` whose header is in ``text``; ``ValueError`` when none is."""
    for layout in layouts:
        try:
            devices = read_device_table(text, layout.header)
        except ValueError:
            continue
        return [_card(device, gpu_type, layout, numa_of) for device in devices]
    raise ValueError(f"no {gpu_type} device table header")


def _card(device: Device, gpu_type: str, layout: TableLayout, numa_of: NumaLookup) -> Card:
    index = int(device[layout.index].split()[0])
    bus_id = device.get(layout.bus_id) or None
    used, total = used_and_total_mb(device[layout.memory])
    return Card(
        index=index,
        uuid=fallback_uuid(gpu_type, index, bus_id),
        type=gpu_type,
        model=device[layout.model] or None,
        memory_total_mb=total,
        memory_used_mb=used,
        utilization=optional_int(device.get(layout.utilization)),
        temperature=optional_int(device.get(layout.temperature)),
        numa=numa_of(bus_id),
    )


def _row_groups(text: str) -> list[list[Row]]:
    """Runs of consecutive table rows split into cells; rules (``+---+``, ``|===|``), blank and other lines end runs."""
    groups: list[list[Row]] = []
    current: list[Row] = []
    for line in text.expandtabs(8).splitlines():
        stripped = line.strip()
        if stripped.startswith("|") and stripped.strip("|+-= "):
            current.append(stripped.split("|")[1:-1] if stripped.endswith("|") else stripped.split("|")[1:])
            continue
        if current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def _labels(cell: Cell) -> list[tuple[str, int, int]]:
    """``(label, start, end)`` of each header label in a cell; labels are apart by two or more spaces."""
    return [(match[0].lower(), match.start(), match.end()) for match in _LABEL.finditer(cell)]


def _device(header: list[Row], rows: list[Row]) -> Device:
    device: Device = {}
    for header_row, row in zip(header, rows, strict=True):
        for header_cell, cell in zip(header_row, row, strict=True):
            labels = _labels(header_cell)
            words: dict[str, list[str]] = {label: [] for label, _, _ in labels}
            for word in _WORD.finditer(cell) if labels else ():
                words[_owner(word.start(), word.end(), labels)].append(word[0])
            for label, values in words.items():
                device.setdefault(label, " ".join(values))
    return device


def _owner(start: int, end: int, labels: list[tuple[str, int, int]]) -> str:
    def overlap(label: tuple[str, int, int]) -> int:
        return min(end, label[2]) - max(start, label[1])

    best = max(labels, key=overlap)
    if overlap(best) > 0:
        return best[0]
    return min(labels, key=lambda label: max(label[1] - end, start - label[2]))[0]
