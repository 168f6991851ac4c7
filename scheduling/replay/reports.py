"""Replay reports kept for the plugin page: `manage.py replay_trace --report` writes a run's figures (JSON) and its
allocation chart (SVG) side by side in `settings.REPLAY_REPORT_DIR` (`.data/replay/` by default), named by the time
of the run, and the page links the newest."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from django.conf import settings

PREFIX = "replay-"
STAMP = "%Y%m%dT%H%M%S%fZ"


@dataclass(frozen=True)
class ReplayReport:
    made_at: datetime
    figures: dict
    chart_path: Path

    @property
    def policies(self) -> list[str]:
        return list(self.figures.get("policies", {}))

    @property
    def window(self) -> str:
        """What was replayed: the window of submissions, or the trace file."""
        window = self.figures.get("window")
        if window:
            since, until = (datetime.fromisoformat(window[key]) for key in ("since", "until"))
            return (f"tasks created in the last {window['length']} "
                    f"({since:%Y-%m-%d %H:%M} → {until:%Y-%m-%d %H:%M} UTC)")
        trace = f"openb trace {Path(self.figures.get('pods', '')).name}"
        if self.figures.get("mode") == "dynamic":
            return f"{trace} with departures, arrivals compressed {self.figures.get('compress', 1):g}×"
        return trace


def report_write(*, figures: dict, chart: str, made_at: datetime) -> Path:
    """Keep one run's figures and chart; returns the chart's path (the JSON sits beside it)."""
    folder = Path(settings.REPLAY_REPORT_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    stem = PREFIX + made_at.astimezone(timezone.utc).strftime(STAMP)
    chart_path = folder / f"{stem}.svg"
    # The chart first: a report is listed by its JSON, which then always has its chart.
    chart_path.write_text(chart)
    (folder / f"{stem}.json").write_text(json.dumps({**figures, "made_at": made_at.isoformat()}, indent=1))
    return chart_path


def latest_report() -> ReplayReport | None:
    """The newest report whose figures can be read and whose chart is there, or None."""
    folder = Path(settings.REPLAY_REPORT_DIR)
    for path in sorted(folder.glob(f"{PREFIX}*.json"), reverse=True):
        chart_path = path.with_suffix(".svg")
        try:
            figures = json.loads(path.read_text())
            made_at = datetime.strptime(path.stem.removeprefix(PREFIX), STAMP).replace(tzinfo=timezone.utc)
        except (OSError, ValueError):
            continue
        if isinstance(figures, dict) and chart_path.is_file():
            return ReplayReport(made_at, figures, chart_path)
    return None
