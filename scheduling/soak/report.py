"""A soak run's figures over time and its report: `report.json`, `report.md` and `timeline.svg` in the report folder."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

from django.template.loader import render_to_string

from scheduling.bench.figures import percentile
from scheduling.soak.faults import FaultRecord

WIDTH, PANEL_HEIGHT, LEFT, RIGHT, TOP, GAP = 960, 160, 64, 150, 30, 50
COLORS = {"binds/s": "#2563eb", "latency p50": "#16a34a", "latency p99": "#dc2626"}


@dataclass
class Sample:
    at: float  # seconds since the start
    binds_per_second: float
    latency_p50: float | None
    latency_p99: float | None


@dataclass
class Report:
    minutes: float
    nodes: int
    tenants: int
    rate: float
    seed: int
    samples: list[Sample] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    submitted: int = 0
    bound: int = 0
    finished: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    answers: dict[str, int] = field(default_factory=dict)
    server_errors: list[str] = field(default_factory=list)
    restarted: dict[str, int] = field(default_factory=dict)

    def recovery_by_kind(self) -> dict[str, dict]:
        by_kind: dict[str, list[float | None]] = defaultdict(list)
        for fault in self.faults:
            by_kind[fault.kind].append(fault.recovery_seconds)
        return {kind: {"count": len(times),
                       "p50_s": _round(statistics.median([t for t in times if t is not None] or [0.0])),
                       "max_s": _round(max((t for t in times if t is not None), default=0.0)),
                       "not_recovered": sum(t is None for t in times)}
                for kind, times in sorted(by_kind.items())}

    @property
    def summary_line(self) -> str:
        return f"soak: tasks={self.submitted} faults={len(self.faults)} violations={len(self.violations)}"

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        document = {**asdict(self), "recovery": self.recovery_by_kind()}
        (folder / "report.json").write_text(json.dumps(document, indent=2, default=str))
        (folder / "timeline.svg").write_text(timeline_chart(self))
        (folder / "report.md").write_text(self.markdown())

    def markdown(self) -> str:
        lines = [f"# Soak run: {self.minutes:g} min, {self.nodes} nodes, {self.tenants} tenants, {self.rate:g} "
                 f"submissions/s, seed {self.seed}", "",
                 f"Submissions (tasks and groups) {self.submitted}; tasks bound {self.bound}, finished "
                 f"{self.finished} (group members and replicas included); by status now: {self.statuses}.", "",
                 "| fault | injected | recovery p50 (s) | max (s) | not back |", "|---|---|---|---|---|"]
        lines += [f"| {kind} | {row['count']} | {row['p50_s']} | {row['max_s']} | {row['not_recovered']} |"
                  for kind, row in self.recovery_by_kind().items()]
        lines += ["", "![timeline](timeline.svg)", "", f"API answers by status: {self.answers}",
                  f"Server errors the tenants met (during faults; not an invariant): {self.server_errors or 'none'}",
                  f"Processes restarted by the soak: {self.restarted}", "", "## Violations", ""]
        lines += [f"- {violation}" for violation in self.violations] or ["None."]
        lines += ["", "## Faults", ""]
        lines += [f"- {fault.at:.0f} s {fault.kind}: {fault.detail}; back after "
                  f"{'—' if fault.recovery_seconds is None else f'{fault.recovery_seconds:.1f} s'}"
                  for fault in self.faults]
        return "\n".join(lines) + "\n"


def sample(*, at: float, since: datetime, until: datetime) -> Sample:
    """Binds per second and the queue latency of the tasks bound between `since` and `until`."""
    from scheduling.models import Task

    waits = sorted((scheduled - created).total_seconds() for created, scheduled in
                   Task.objects.filter(scheduled_at__gt=since, scheduled_at__lte=until)
                   .values_list("created_at", "scheduled_at"))
    seconds = max((until - since).total_seconds(), 1e-6)
    p50, p99 = (round(percentile(waits, p), 3) if waits else None for p in (50, 99))
    return Sample(at, round(len(waits) / seconds, 2), p50, p99)


def timeline_chart(report: Report) -> str:
    end = max([s.at for s in report.samples] + [report.minutes * 60, 1.0])
    plot_width = WIDTH - LEFT - RIGHT

    def x(at: float) -> float:
        return LEFT + plot_width * at / end

    panels = []
    series = [("binds per second", [("binds/s", [(s.at, s.binds_per_second) for s in report.samples])]),
              ("queue latency, seconds", [(name, [(s.at, getattr(s, attr)) for s in report.samples
                                                  if getattr(s, attr) is not None])
                                          for name, attr in (("latency p50", "latency_p50"),
                                                             ("latency p99", "latency_p99"))])]
    for position, (title, lines) in enumerate(series):
        top = TOP + position * (PANEL_HEIGHT + GAP)
        bottom = top + PANEL_HEIGHT
        peak = max([value for _, points in lines for _, value in points] + [1.0])

        def y(value: float, bottom=bottom, peak=peak) -> float:
            return bottom - PANEL_HEIGHT * value / peak

        panels.append({
            "title": title, "top": top, "bottom": bottom,
            "y_ticks": [{"y": y(peak * step / 4), "label": f"{peak * step / 4:.3g}"} for step in range(5)],
            "lines": [{"name": name, "color": COLORS[name],
                       "points": " ".join(f"{x(at):.1f},{y(value):.1f}" for at, value in points),
                       "label_y": y(points[-1][1]) if points else bottom} for name, points in lines],
        })
    bottom_y = TOP + 2 * PANEL_HEIGHT + GAP
    return render_to_string("scheduling/soak/timeline_chart.svg", {
        "width": WIDTH, "height": bottom_y + 60, "left": LEFT, "right_x": WIDTH - RIGHT, "top": TOP,
        "bottom_y": bottom_y, "label_x": WIDTH - RIGHT + 8, "x_title": LEFT + plot_width / 2, "panels": panels,
        "faults": [{**asdict(fault), "x": x(fault.at)} for fault in report.faults],
        "x_ticks": [{"x": x(end * step / 6), "label": f"{end * step / 6 / 60:.1f}"} for step in range(7)],
    })


def _round(value: float) -> float:
    return round(value, 1)
