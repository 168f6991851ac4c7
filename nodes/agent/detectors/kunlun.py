"""Kunlunxin XPUs via ``xpu_smi -m`` (one line per device), falling back to the default ``xpu_smi`` table, then
the same two under the tool's other name ``xpu-smi``.

XRE 4.x installs ``xpu_smi``; on XRE 5.x (P800) both names are in use. Intel's xpumanager ships an unrelated
``xpu-smi``, so nothing is run unless the host has a Kunlunxin PCI device (vendor ``0x1d22``).

``-m`` prints 32 whitespace-separated fields per device, and a line with fewer is no device (the model is quoted
when it has a space, ``"P800 OAM"``): 0 PCI address, 1 board, 2 device id, 4 temperature (C), 17/18 memory
used/total (MiB), 19 utilisation (%), 21 model, 22 the die's index on its board. The default table comes in three
layouts, all read by their header: XRE 4.0 ``| DevID | PCI Addr | Model | SN | INODE | UseRate | L3 | Memory |``
(memory ``used / total MB``), the XRE 4.0/4.33 wide one that adds ``State``, ``Power(W)`` and ``Temp``, and the
nvidia-smi-like box of XRE 5 (``XPU Name`` / ``Temp`` / ``Memory-Usage`` / ``XPU-Util``, three rows per device).
A saved ``xpu-smi -q`` report (``XPU <bus id>`` blocks) is read too; the agent does not run ``-q``, whose only
published output is of one device (``--id=0``).

A K200 card holds two dies, two devices with one PCI address; each die after a board's first gets its position on
the board appended to the card id, so that every device has its own.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import replace

from .base import (
    Card, CommandRunner, Detector, NumaLookup, canonical_bus_id, fallback_uuid, mebibytes, optional_int,
    pci_vendor_present, sysfs_numa_node,
)
from .query_blocks import DeviceBlock, parse_query_blocks
from .tables import TableLayout, cards_from_table

KUNLUNXIN_PCI_VENDOR = "0x1d22"
XRE5_TABLE = TableLayout(index="xpu", model="name", memory="memory-usage", utilization="xpu-util",
                         temperature="temp", bus_id="bus-id")
XRE4_TABLE = TableLayout(index="devid", model="model", memory="memory", utilization="userate", temperature="temp",
                         bus_id="pci addr")
_MACHINE_FIELDS = 32  # a line cut short is not a device line
_QUERY_START = re.compile(r"XPU\s+(?P<label>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")


class KunlunDetector(Detector):
    gpu_type = "kunlun"
    commands = (("xpu_smi", "-m"), ("xpu_smi",), ("xpu-smi", "-m"), ("xpu-smi",))

    def __init__(self, numa_lookup: NumaLookup = sysfs_numa_node,
                 vendor_present: Callable[[str], bool] = pci_vendor_present) -> None:
        super().__init__(numa_lookup)
        self.vendor_present = vendor_present

    def query(self, runner: CommandRunner) -> list[Card]:
        if not self.vendor_present(KUNLUNXIN_PCI_VENDOR):
            return []
        return super().query(runner)

    def parse(self, text: str) -> list[Card]:
        machine_lines = [fields for fields in map(_machine_fields, text.splitlines()) if fields]
        if machine_lines:
            cards = [self._machine_card(fields) for fields in machine_lines]
        elif _QUERY_START.search(text):
            cards = [self._query_card(block) for block in parse_query_blocks(text, _QUERY_START)]
        else:
            cards = cards_from_table(text, self.gpu_type, [XRE5_TABLE, XRE4_TABLE], self.numa_lookup)
        return _one_id_per_die(cards)

    def _machine_card(self, fields: list[str]) -> Card:
        index = int(fields[2])
        return Card(
            index=index,
            uuid=fallback_uuid(self.gpu_type, index, fields[0]),
            type=self.gpu_type,
            model=fields[21].strip("()") or None,
            memory_total_mb=mebibytes(fields[18]),
            memory_used_mb=mebibytes(fields[17]),
            utilization=optional_int(fields[19]),
            temperature=optional_int(fields[4]),
            numa=self.numa_lookup(fields[0]),
        )

    def _query_card(self, block: DeviceBlock) -> Card:
        minor_number = block.get("minor number")
        if minor_number is None:
            raise KeyError(f"XPU {block.label}: no Minor Number")
        index = int(minor_number)
        bus_id = block.get("pci/bus id") or block.label
        return Card(
            index=index,
            uuid=fallback_uuid(self.gpu_type, index, bus_id),
            type=self.gpu_type,
            model=block.get("product name"),
            memory_total_mb=mebibytes(block.get("memory usage/total")),
            memory_used_mb=mebibytes(block.get("memory usage/used")),
            utilization=optional_int(block.get("utilization/xpu")),
            temperature=optional_int(block.get("temperature/xpu current temp")),
            numa=self.numa_lookup(bus_id),
        )


def _machine_fields(line: str) -> list[str] | None:
    """The fields of an ``xpu_smi -m`` device line, ``None`` for any other line."""
    try:
        fields = shlex.split(line)
    except ValueError:
        return None
    if len(fields) < _MACHINE_FIELDS or canonical_bus_id(fields[0]) is None:
        return None
    return fields


def _one_id_per_die(cards: list[Card]) -> list[Card]:
    dies_seen: dict[str, int] = {}
    distinct = []
    for card in cards:
        position = dies_seen.get(card.uuid, 0)
        dies_seen[card.uuid] = position + 1
        distinct.append(replace(card, uuid=f"{card.uuid}-{position}") if position else card)
    return distinct
