"""Geometry of the usage page's chart (design §17.4): card-hours per day, stacked by GPU type, as plain SVG shapes
the template draws (no script, no CDN)."""

from collections import defaultdict
from datetime import date, timedelta

# Fills per GPU type, in the order types first appear (sorted); the palette repeats beyond it.
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2", "#ff9da6", "#9d755d",
           "#bab0ac")
WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 760, 240, 56, 28, 12


def stacked_days(rows: list[dict], *, day_from: date, day_to: date) -> dict:
    """`rows`: {day, gpu_type, card_hours}. One column per day of the range (empty days included), a segment per
    GPU type, and the y axis' ticks."""
    hours: dict[date, dict[str, float]] = defaultdict(dict)
    for row in rows:
        hours[row["day"]][row["gpu_type"] or "—"] = row["card_hours"]
    types = sorted({gpu_type for by_type in hours.values() for gpu_type in by_type})
    colours = {gpu_type: PALETTE[position % len(PALETTE)] for position, gpu_type in enumerate(types)}
    days = [day_from + timedelta(days=offset) for offset in range((day_to - day_from).days + 1)]
    top = max((sum(hours[day].values()) for day in days), default=0) or 1
    plot_w, plot_h = WIDTH - LEFT - 8, HEIGHT - BOTTOM - TOP
    step = plot_w / len(days)
    columns = []
    for position, day in enumerate(days):
        y = TOP + plot_h
        segments = []
        for gpu_type in types:
            value = hours[day].get(gpu_type, 0.0)
            if not value:
                continue
            h = plot_h * value / top
            y -= h
            segments.append({"gpu_type": gpu_type, "hours": value, "y": y, "h": h, "fill": colours[gpu_type]})
        columns.append({"day": day, "x": LEFT + position * step + step * 0.1, "w": step * 0.8,
                        "total": sum(hours[day].values()), "segments": segments,
                        "label": position % max(1, len(days) // 10) == 0})
    ticks = [{"value": top * fraction, "y": TOP + plot_h * (1 - fraction)} for fraction in (0, 0.25, 0.5, 0.75, 1)]
    return {"width": WIDTH, "height": HEIGHT, "left": LEFT, "base_y": TOP + plot_h, "label_y": TOP + plot_h + 16,
            "columns": columns, "ticks": ticks, "legend": [{"gpu_type": t, "fill": colours[t]} for t in types]}
