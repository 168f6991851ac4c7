"""Replay reports in the reports folder: the newest readable one is the latest."""

from datetime import datetime, timedelta, timezone

from scheduling.replay.reports import latest_report, report_write

MADE = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
DB_FIGURES = {"source": "database", "policies": {"binpack": {}, "spread": {}},
              "window": {"length": "24h", "since": "2026-02-28T12:00:00+00:00", "until": "2026-03-01T12:00:00+00:00"}}


def test_no_folder_no_report(settings, tmp_path):
    settings.REPLAY_REPORT_DIR = tmp_path / "none-yet"
    assert latest_report() is None


def test_the_newest_report_is_the_latest_and_says_what_it_replayed(settings, tmp_path):
    settings.REPLAY_REPORT_DIR = tmp_path
    report_write(figures={"source": "trace", "pods": "/x/openb_pod_list_default.csv", "policies": {"fgd": {}}},
                 chart="<svg>old</svg>", made_at=MADE - timedelta(days=1))
    chart = report_write(figures=DB_FIGURES, chart="<svg>new</svg>", made_at=MADE)

    latest = latest_report()
    assert (latest.made_at, latest.chart_path, latest.policies) == (MADE, chart, ["binpack", "spread"])
    assert latest.window == "tasks created in the last 24h (2026-02-28 12:00 → 2026-03-01 12:00 UTC)"


def test_a_report_that_cannot_be_read_is_passed_over(settings, tmp_path):
    settings.REPLAY_REPORT_DIR = tmp_path
    report_write(figures={"source": "trace", "pods": "openb_pod_list_default.csv", "policies": {"fgd": {}}},
                 chart="<svg/>", made_at=MADE - timedelta(days=1))
    broken = report_write(figures=DB_FIGURES, chart="<svg/>", made_at=MADE)
    broken.with_suffix(".json").write_text("{not json")
    chartless = report_write(figures=DB_FIGURES, chart="<svg/>", made_at=MADE + timedelta(hours=1))
    chartless.unlink()

    assert latest_report().window == "openb trace openb_pod_list_default.csv"
