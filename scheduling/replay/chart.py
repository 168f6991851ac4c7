"""The allocation curve of a replay as a standalone SVG (allocated % against arrived %, one line per policy), drawn
server-side with the dashboard's palette and type (templates/scheduling/replay/allocation_chart.svg)."""

import numpy as np
from django.template.loader import render_to_string

WIDTH, HEIGHT = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 48, 120, 16, 40
# x-axis tick spacing: the first that keeps to about ten ticks (a day's submissions may arrive many times the GPUs).
X_TICK_STEPS = (20, 50, 100, 200, 500, 1000, 2000, 5000)
PALETTE = ("#4f46e5", "#34d399", "#f59e0b", "#ef4444", "#0ea5e9", "#a855f7", "#64748b")


def allocation_chart(curves: dict[str, list[tuple[float, float]]], *, arrival: float) -> str:
    x_max = max(100.0, arrival * 100)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(value: float) -> float:
        return LEFT + plot_w * value / x_max

    def y(value: float) -> float:
        return TOP + plot_h * (1 - value / 100)

    lines = []
    for index, (name, points) in enumerate(curves.items()):
        final = points[-1][1] if points else 0.0
        lines.append({
            "name": name, "color": PALETTE[index % len(PALETTE)], "final": final,
            "points": " ".join(f"{x(arrived):.1f},{y(allocated):.1f}" for arrived, allocated in points),
            "label_y": 0.0,
        })
    # End labels in the right margin, ordered by final value and kept 14 px apart.
    previous = TOP - 4.0
    for line in sorted(lines, key=lambda line: -line["final"]):
        line["label_y"] = previous = max(y(line["final"]) + 4, previous + 14)
    step = next((step for step in X_TICK_STEPS if x_max / step <= 10), 10 * X_TICK_STEPS[-1])
    x_ticks = [{"x": x(value), "label": f"{value:g}"} for value in range(0, int(x_max) + 1, step)]
    y_ticks = [{"y": y(value), "label": f"{value:g}"} for value in range(0, 101, 20)]
    return render_to_string("scheduling/replay/allocation_chart.svg", {
        "width": WIDTH, "height": HEIGHT, "left": LEFT, "top": TOP, "right_x": LEFT + plot_w, "bottom_y": TOP + plot_h,
        "label_x": LEFT + plot_w + 8, "x_title": LEFT + plot_w / 2, "lines": lines, "x_ticks": x_ticks,
        "y_ticks": y_ticks, "full_x": x(100), "ideal_end": (x(100), y(100)),
    })


DYNAMIC_WIDTH, DYNAMIC_HEIGHT = 960, 360
PANEL_GAP = 64


def dynamic_chart(figures: dict) -> str:
    """The dynamic replay (`replay_trace --dynamic`) as one SVG: allocation over time per policy (mean over the
    seeds) on the left, the p99 waiting time by size class per policy (grouped bars, mean over the seeds) on the
    right."""
    policies = figures["policies"]
    plot_h = DYNAMIC_HEIGHT - TOP - BOTTOM
    left_w = (DYNAMIC_WIDTH - LEFT - PANEL_GAP - LEFT - 16) // 2
    hours = max((point[0] for summary in policies.values() for point in summary["curve"]), default=1.0) or 1.0

    def y(fraction: float) -> float:
        return TOP + plot_h * (1 - fraction)

    lines = []
    for index, (name, summary) in enumerate(policies.items()):
        lines.append({
            "name": name, "color": PALETTE[index % len(PALETTE)],
            "figure": summary["time_weighted_allocation"]["mean"],
            "points": " ".join(f"{LEFT + left_w * at / hours:.1f},{y(allocated / 100):.1f}"
                               for at, allocated in summary["curve"]),
        })
    sizes = list(next(iter(policies.values()))["classes"]) if policies else []
    waits = {name: [(summary["classes"][size]["wait_p99"] or {}).get("mean", 0.0) / 60 for size in sizes]
             for name, summary in policies.items()}
    longest = max((value for values in waits.values() for value in values), default=0.0) or 1.0
    bar_left = LEFT + left_w + PANEL_GAP + LEFT
    group_w = left_w / max(len(sizes), 1)
    bar_w = group_w * 0.8 / max(len(policies), 1)
    bars = [{"x": bar_left + group_w * column + group_w * 0.1 + bar_w * row, "width": bar_w,
             "y": y(value / longest), "height": plot_h * value / longest, "color": PALETTE[row % len(PALETTE)],
             "title": f"{name}, {size}: p99 wait {value:.1f} min"}
            for row, (name, values) in enumerate(waits.items()) for column, (size, value) in enumerate(zip(sizes, values))]
    groups = [{"x": bar_left + group_w * (column + 0.5), "label": size} for column, size in enumerate(sizes)]
    return render_to_string("scheduling/replay/dynamic_chart.svg", {
        "width": DYNAMIC_WIDTH, "height": DYNAMIC_HEIGHT, "left": LEFT, "top": TOP, "bottom_y": TOP + plot_h,
        "left_right_x": LEFT + left_w, "bar_left": bar_left, "bar_right": bar_left + left_w, "lines": lines,
        "bars": bars, "groups": groups,
        "y_ticks": [{"y": y(value / 100), "label": f"{value:g}"} for value in range(0, 101, 20)],
        "x_ticks": [{"x": LEFT + left_w * value / hours, "label": f"{value:g}"}
                    for value in _nice_ticks(hours)],
        "wait_ticks": [{"y": y(value / longest), "label": f"{value:g}"} for value in _nice_ticks(longest)],
        # Bottom right, on a white ground: the curves run high at the end of the window, rarely low there.
        "legend": [{"name": line["name"], "color": line["color"], "figure": line["figure"],
                    "y": TOP + plot_h - 8 - 14 * (len(lines) - index)} for index, line in enumerate(lines)],
        "legend_x": LEFT + left_w - 150, "legend_top": TOP + plot_h - 10 - 14 * len(lines),
        "legend_height": 14 * len(lines) + 4,
    })


def _nice_ticks(maximum: float) -> list[float]:
    """About five round ticks from 0 to `maximum`."""
    raw = maximum / 5
    magnitude = 10 ** np.floor(np.log10(raw)) if raw > 0 else 1.0
    step = next(factor * magnitude for factor in (1, 2, 5, 10) if factor * magnitude >= raw)
    return [round(float(value), 6) for value in np.arange(0, maximum + step / 1000, step)]
