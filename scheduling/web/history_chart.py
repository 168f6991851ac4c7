"""The dashboard's history charts: the last day's points as geometry for script-free inline SVG."""

from datetime import datetime, timedelta

from django.utils import timezone

from scheduling.history.samples import HISTORY_KEEP, cluster_history
from scheduling.models import ClusterSample

WIDTH, HEIGHT, PAD = 640, 110, 4
TYPE_COLOURS = ("#6366f1", "#10b981", "#f59e0b", "#ec4899", "#0ea5e9", "#8b5cf6", "#f97316", "#14b8a6")


def _x(at: datetime, since: datetime) -> float:
    return round(PAD + (WIDTH - 2 * PAD) * (at - since) / HISTORY_KEEP, 1)


def _y(value: float, top: float) -> float:
    return round(HEIGHT - PAD - (HEIGHT - 2 * PAD) * (value / top if top else 0), 1)


def _line(points: list[tuple[datetime, float]], since: datetime, top: float) -> str:
    return " ".join(f"{_x(at, since)},{_y(value, top)}" for at, value in points)


def history_charts(*, markers: list[dict], now: datetime | None = None) -> dict | None:
    """Three charts over the last day (allocation % per GPU type, tasks pending, mean cycle duration) and the
    plugin changes as markers ({at, text}); None before the first point."""
    now = now or timezone.now()
    since = now - HISTORY_KEEP
    samples: list[ClusterSample] = cluster_history(since=since)
    if not samples:
        return None
    gpu_types = sorted({gpu_type for sample in samples for gpu_type in sample.gpu_total})
    allocation = [
        {"type": gpu_type, "colour": TYPE_COLOURS[index % len(TYPE_COLOURS)],
         "now": round(100 * samples[-1].gpu_used.get(gpu_type, 0) / (samples[-1].gpu_total.get(gpu_type) or 1)),
         "points": _line([(s.at, 100 * s.gpu_used.get(gpu_type, 0) / s.gpu_total[gpu_type])
                          for s in samples if s.gpu_total.get(gpu_type)], since, 100)}
        for index, gpu_type in enumerate(gpu_types)]
    pending_top = max(sample.pending for sample in samples) or 1
    cycles = [(sample.at, sample.cycle_ms) for sample in samples if sample.cycle_ms is not None]
    cycle_top = max((ms for _, ms in cycles), default=0) or 1
    return {
        "width": WIDTH, "height": HEIGHT,
        "allocation": allocation,
        "pending": {"points": _line([(s.at, s.pending) for s in samples], since, pending_top),
                    "top": pending_top, "now": samples[-1].pending},
        "cycle": {"points": _line(cycles, since, cycle_top), "top": round(cycle_top),
                  "now": round(cycles[-1][1]) if cycles else None},
        "markers": [{"x": _x(marker["at"], since), "text": marker["text"]} for marker in markers
                    if since <= marker["at"] <= now],
        "hours": [{"x": _x(since + timedelta(hours=hour), since), "label": f"-{24 - hour} h"}
                  for hour in range(0, 24, 6)],
    }
