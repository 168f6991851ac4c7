"""Chart geometry for the dashboard and diagnostics pages, computed here so that the SVGs need no script."""

from scheduling.diagnostics.cluster_view import FRAGMENTATION_SIZES, latest_cycle_fragmentation


def capacity_chart(rows: list[dict], *, width: int = 620, label_width: int = 92, row_height: int = 30) -> dict:
    """Geometry of the horizontal stacked bar chart of cards per architecture."""
    scale_max = max((row["total"] for row in rows), default=0) or 1
    plot = width - label_width - 60
    bars = []
    for position, row in enumerate(rows):
        used_w = plot * row["used"] / scale_max
        free_w = plot * row["free"] / scale_max
        offline_w = plot * row["offline"] / scale_max
        bars.append({**row, "y": 10 + position * row_height, "used_w": used_w, "free_x": label_width + used_w,
                     "free_w": free_w, "offline_x": label_width + used_w + free_w, "offline_w": offline_w,
                     "end_x": label_width + used_w + free_w + offline_w + 8})
    return {"width": width, "height": 20 + len(rows) * row_height, "label_width": label_width, "bars": bars}


def fragmentation_panel() -> dict:
    """Free cards vs cards usable by a k-card task and fgd's fragment of the idle capacity against the recent
    tasks' shapes, with bar geometry."""
    figures = latest_cycle_fragmentation()
    free = figures["free_cards"]
    bars = [{"label": "Free cards", "value": free, "free": True}]
    bars += [{"label": f"{k}-card task", "value": figures["usable"][k]} for k in FRAGMENTATION_SIZES]
    fgd = figures["fgd"]
    # fgd's measure in the same units (cards): idle capacity (shards' free share included) and the part of it the
    # recent tasks' shapes could not use.
    fgd_bars = [{"label": "Idle capacity", "value": fgd["idle"], "free": True},
                {"label": "FGD fragment", "value": fgd["fragmented"], "fgd": True}]
    top = max(max(bar["value"] for bar in bars + fgd_bars), 1)
    for position, bar in enumerate(bars + fgd_bars):
        bar["y"] = 8 + position * 30 + (12 if position >= len(bars) else 0)
        bar["w"] = 210 * bar["value"] / top
        bar["end_x"] = 96 + bar["w"] + 6
    fgd_percent = 100 * fgd["fragmented"] / fgd["idle"] if fgd["idle"] else 0.0
    return {"free": free, "bars": bars, "fgd_bars": fgd_bars, "fgd": {**fgd, "percent": fgd_percent},
            "divider_y": 8 + len(bars) * 30, "height": 28 + (len(bars) + len(fgd_bars)) * 30}


def autoscale_chart(samples: list[tuple], *, target: float, now, width: int = 620, height: int = 160) -> dict:
    """Geometry of the group page's last hour (design §17.2): desired and ready replicas on the left scale, the
    metric per ready replica and its target on the right one; `samples`: (at, desired, ready, value) oldest first."""
    left, right, top, bottom = 36, width - 44, 10, height - 22
    start = now.timestamp() - 3600

    def x(at) -> float:
        return left + (right - left) * max(at.timestamp() - start, 0) / 3600

    replicas_top = max([desired for _, desired, _, _ in samples] + [ready for _, _, ready, _ in samples] + [1])
    per_replica = [value / ready if ready else 0.0 for _, _, ready, value in samples]
    metric_top = max(per_replica + [target * 1.5, 1e-9])

    def y(value: float, scale_top: float) -> float:
        return bottom - (bottom - top) * value / scale_top

    def line(values, scale_top) -> str:
        return " ".join(f"{x(at):.1f},{y(value, scale_top):.1f}" for (at, *_), value in zip(samples, values))

    return {
        "width": width, "height": height, "left": left, "right": right, "top": top, "bottom": bottom,
        "desired": line([desired for _, desired, _, _ in samples], replicas_top),
        "ready": line([ready for _, _, ready, _ in samples], replicas_top),
        "metric": line(per_replica, metric_top),
        "target_y": y(target, metric_top), "replicas_top": replicas_top, "metric_top": metric_top,
        "samples": len(samples), "latest": samples[-1] if samples else None,
    }
