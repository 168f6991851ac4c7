"""Cambricon MLU health from `cnmon`'s `Ecc-Error` cell. Cambricon does not document whether the cell counts
corrected errors too, so a non-zero count is degraded, not failed; `N/A` (ECC off) and 0 are ok."""

from __future__ import annotations

from .base import DEGRADED, CardFinding, HealthReader, HealthReport, count
from .tables import health_from_table


def _judge(cell: str, finding: CardFinding) -> None:
    if count(cell):
        finding.note(DEGRADED, "ecc-error", f"cnmon reports {count(cell)} ECC error(s)")


class CambriconHealthReader(HealthReader):
    gpu_type = "cambricon"
    commands = (("cnmon",),)

    def parse(self, text: str) -> HealthReport:
        return health_from_table(text, index_label="card", header=("card", "name", "ecc-error"),
                                 cell_label="ecc-error", judge=_judge)
