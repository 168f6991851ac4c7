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


def test_the_dynamic_chart_draws_allocation_over_time_and_a_bar_per_policy_and_size_class():
    from scheduling.replay.chart import dynamic_chart

    classes = {size: {"wait_p99": {"mean": wait, "stdev": 0.0}} for size, wait in (("1 card", 600.0),
                                                                                    ("8 cards", 3000.0))}
    figures = {"policies": {name: {"time_weighted_allocation": {"mean": share}, "classes": classes,
                                   "curve": [(0.0, 40.0), (1.5, share), (3.0, 95.0)]}
                            for name, share in (("binpack", 90.0), ("fgd", 93.0))}}

    svg = dynamic_chart(figures)

    assert svg.count('<polyline class="allocation"') == 2 and svg.count('<rect class="wait"') == 4
    assert "fgd, 8 cards: p99 wait 50.0 min" in svg and "fgd 93.00 %" in svg and "binpack 90.00 %" in svg
    # The legend sits in the lower part of the plot, below where the curves end.
    legend_y = [float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" font-size="12" font-weight="600"', svg)]
    assert legend_y and min(legend_y) > 16 + (360 - 16 - 40) / 2
