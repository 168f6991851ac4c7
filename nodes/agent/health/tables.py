"""Health read from the error column of a vendor's boxed device table (brsmi, cnmon, XPU-SMI, mx-smi): the table is
read by its header (`nodes.agent.detectors.tables`), so a moved or widened column reads the same."""

from __future__ import annotations

from collections.abc import Callable

from nodes.agent.detectors.tables import read_device_table

from .base import CardFinding, CardHealth, HealthReport

Judge = Callable[[str, CardFinding], None]
"""Notes on a finding what one device's cell says."""


def health_from_table(text: str, *, index_label: str, header: tuple[str, ...], cell_label: str,
                      judge: Judge) -> HealthReport:
    cards: list[CardHealth] = []
    for device in read_device_table(text, header):
        finding = CardFinding()
        judge(device.get(cell_label, ""), finding)
        cards.append(finding.card(int(device[index_label].split()[0])))
    return HealthReport(tuple(cards))
