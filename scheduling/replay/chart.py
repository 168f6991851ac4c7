"""The allocation curve of a replay as a standalone SVG (allocated % against arrived %, one line per policy), drawn
server-side with the dashboard's palette and type (templates/scheduling/replay/allocation_chart.svg)."""

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
