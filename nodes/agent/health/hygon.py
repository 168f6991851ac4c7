"""Hygon DCU health from `hy-smi`'s default table (`DCU  Temp  AvgPwr … Mode`). It has no health or error field
(`Mode` is a performance setting), so a DCU it lists is `ok`: no error shown. A tool that does not answer is a
failed verdict."""

from __future__ import annotations

from .base import CardHealth, HealthReader, HealthReport


class HygonHealthReader(HealthReader):
    gpu_type = "hygon"
    commands = (("hy-smi",),)

    def parse(self, text: str) -> HealthReport:
        lines = text.splitlines()
        header = next((position for position, line in enumerate(lines) if line.split()[:1] == ["DCU"]), None)
        if header is None:
            raise ValueError("no DCU table in hy-smi output")
        indexes = []
        for line in lines[header + 1:]:
            first = line.split()[:1]
            if not first or not first[0].isdigit():
                break
            indexes.append(int(first[0]))
        return HealthReport(tuple(CardHealth(index) for index in indexes))
