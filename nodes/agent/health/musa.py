"""Moore Threads GPU health from `mthreads-gmi`. Its default table shows no error counter or health field (only
`ECC Mode`, a setting), so a card it lists is `ok` and the reading says only that no error is shown; a tool that
does not answer is a failed verdict."""

from __future__ import annotations

from nodes.agent.detectors.musa import parse_mthreads_gmi

from .base import CardHealth, HealthReader, HealthReport


class MusaHealthReader(HealthReader):
    gpu_type = "musa"
    commands = (("mthreads-gmi",),)

    def parse(self, text: str) -> HealthReport:
        cards = parse_mthreads_gmi(text)
        if not cards:
            raise ValueError("no card in mthreads-gmi output")
        return HealthReport(tuple(CardHealth(card.index) for card in cards))
