"""Kunlunxin XPU health: `Volatile Uncorr. ECC` of the XRE 5 `xpu_smi` table and the `ECC Errors` section of
`xpu-smi -q` (volatile DRAM uncorrectable → failed, only in the aggregate → degraded). The XRE 4 tables show
`State` (`N` in every published capture); what its other values mean is not published, so they are not judged."""

from __future__ import annotations

import re

from nodes.agent.detectors.query_blocks import parse_query_blocks

from .base import DEGRADED, FAILED, CardFinding, HealthReader, HealthReport, count
from .tables import health_from_table

_QUERY_START = re.compile(r"XPU\s+(?P<label>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])")


def _judge(cell: str, finding: CardFinding) -> None:
    if count(cell):
        finding.note(FAILED, "ecc-uncorrectable", f"{count(cell)} uncorrectable ECC error(s) since the driver loaded")


class KunlunHealthReader(HealthReader):
    gpu_type = "kunlun"
    commands = (("xpu_smi",),)

    def parse(self, text: str) -> HealthReport:
        if _QUERY_START.search(text):
            return _from_query(text)
        if "Uncorr. ECC" in text:
            return health_from_table(text, index_label="xpu", header=("xpu", "name", "volatile uncorr. ecc"),
                                     cell_label="volatile uncorr. ecc", judge=_judge)
        return health_from_table(text, index_label="devid", header=("devid", "model", "state"),
                                 cell_label="state", judge=lambda cell, finding: None)


def _from_query(text: str) -> HealthReport:
    cards = []
    for position, block in enumerate(parse_query_blocks(text, _QUERY_START)):
        finding = CardFinding()
        volatile = count(block.get("ecc errors/volatile/dram uncorrectable"))
        aggregate = count(block.get("ecc errors/aggregate/dram uncorrectable"))
        if volatile:
            finding.note(FAILED, "ecc-uncorrectable", f"{volatile} uncorrectable DRAM ECC error(s)")
        elif aggregate:
            finding.note(DEGRADED, "ecc-uncorrectable-aggregate",
                         f"{aggregate} uncorrectable DRAM ECC error(s) in the lifetime")
        minor = block.get("minor number")
        cards.append(finding.card(int(minor) if minor and minor.isdigit() else position, block.label))
    if not cards:
        raise ValueError("no XPU block in xpu-smi -q output")
    return HealthReport(tuple(cards))
