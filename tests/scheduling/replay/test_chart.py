"""The allocation chart's x axis fits the arrived demand: a day's submissions may be many times the GPUs."""

import re

from scheduling.replay.chart import allocation_chart


def x_ticks(svg: str) -> list[str]:
    return re.findall(r'text-anchor="middle" font-size="12" fill="#475569">(\d+)</text>', svg)


def test_ticks_every_20_up_to_the_trace_s_130_and_coarser_beyond():
    assert x_ticks(allocation_chart({"fgd": [(0, 0), (130, 90)]}, arrival=1.3)) == [
        "0", "20", "40", "60", "80", "100", "120"]
    assert x_ticks(allocation_chart({"fgd": [(0, 0), (700, 80)]}, arrival=7.0)) == [
        str(value) for value in range(0, 701, 100)]
