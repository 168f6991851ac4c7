"""Biren GPU health from `brsmi`'s `Volatile Uncorr. ECC` cell, read as nvidia-smi's column of the same name: an
uncorrectable ECC error since the driver loaded → failed. Only healthy captures exist (0), so that branch is checked
on the published table with the count changed."""

from __future__ import annotations

from .base import FAILED, CardFinding, HealthReader, HealthReport, count
from .tables import health_from_table


def _judge(cell: str, finding: CardFinding) -> None:
    if count(cell):
        finding.note(FAILED, "ecc-uncorrectable", f"{count(cell)} uncorrectable ECC error(s) since the driver loaded")


class BirenHealthReader(HealthReader):
    gpu_type = "biren"
    commands = (("brsmi",),)

    def parse(self, text: str) -> HealthReport:
        return health_from_table(text, index_label="gpu", header=("gpu", "name", "volatile uncorr. ecc"),
                                 cell_label="volatile uncorr. ecc", judge=_judge)
