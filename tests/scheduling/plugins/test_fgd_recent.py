"""fgd's production target workload: the shapes of the recently submitted tasks, in a bounded Redis list."""

import pytest

from scheduling.cache.snapshot_builder import newest_tasks
from scheduling.plugins.fgd import recent
from scheduling.plugins.fgd.workload import Shape
from scheduling.services.task_create import task_create
from tests.factories import make_task

pytestmark = pytest.mark.django_db


def test_task_create_records_the_shape_once_committed(tenant, fgd_window, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        task_create(tenant=tenant, name="a", gpu_memory_mb=4096, cpu_cores=2, labels={"gpu-model": "A100"})
    assert recent.read_window() == [Shape(shard_mb=4096, cpu=2.0, models="A100")]


def test_the_window_keeps_only_the_latest_tasks(tenant, fgd_window, monkeypatch):
    monkeypatch.setattr(recent, "WINDOW", 3)
    for cards in (8, 1, 1, 2):
        fgd_window(make_task(tenant=tenant, gpu_required=cards))
    assert [shape.cards for shape in recent.read_window()] == [2, 1, 1]


def test_reading_the_window_parses_each_distinct_shape_once(tenant, fgd_window, monkeypatch):
    import json

    for cards in [1, 2, 1, 4] * 10:
        fgd_window(make_task(tenant=tenant, gpu_required=cards))
    parsed, loads = [], json.loads

    def counting(raw):
        parsed.append(raw)
        return loads(raw)

    monkeypatch.setattr(recent.json, "loads", counting)
    window = recent.read_window()

    assert [shape.cards for shape in window] == [4, 1, 2, 1] * 10
    assert len(parsed) == 3


def test_the_workload_is_read_once_per_refresh_period(tenant, fgd_window):
    fgd_window(make_task(tenant=tenant, gpu_required=1))
    first = recent.recent_workload(now=1000.0)
    fgd_window(make_task(tenant=tenant, gpu_required=2))
    assert recent.recent_workload(now=1000.0 + recent.REFRESH_SECONDS / 2) is first
    later = recent.recent_workload(now=1000.0 + recent.REFRESH_SECONDS)
    assert later.shapes == (Shape(cards=1), Shape(cards=2)) and later.popularity == (0.5, 0.5)


def test_a_refresh_that_reads_the_same_window_keeps_the_workload_object(tenant, fgd_window):
    """fgd's per-table caches are keyed by the workload object: an unchanged window must not void them."""
    fgd_window(make_task(tenant=tenant, gpu_required=1))
    first = recent.recent_workload(now=1000.0)
    assert recent.recent_workload(now=1000.0 + recent.REFRESH_SECONDS) is first
    fgd_window(make_task(tenant=tenant, gpu_required=2))
    assert recent.recent_workload(now=1000.0 + 2 * recent.REFRESH_SECONDS) is not first


def test_an_unreachable_window_gives_an_empty_workload(monkeypatch):
    import redis

    monkeypatch.setattr(recent, "_connection", lambda: redis.Redis(host="127.0.0.1", port=1, socket_timeout=0.2,
                                                                   socket_connect_timeout=0.2))
    recent.forget_cached()
    assert not recent.recent_workload(now=5.0)
    recent.forget_cached()


def test_each_database_has_its_own_window():
    from django.db import connection

    assert recent.window_key() == f"{recent.WINDOW_KEY_PREFIX}:{connection.settings_dict['NAME']}"


def test_a_window_redis_lost_is_rebuilt_from_the_newest_tasks_in_postgresql(tenant, fgd_window, monkeypatch):
    monkeypatch.setattr(recent, "WINDOW", 3)
    for cards in (8, 1, 4, 2):
        make_task(tenant=tenant, gpu_required=cards)
    assert recent.recent_workload().shapes == (), "Redis lost the window (a restart, a flush)"

    assert recent.restore_window(newest_tasks) == "recent-task window rebuilt from 3 task(s)"

    assert [shape.cards for shape in recent.read_window()] == [2, 4, 1]
    assert {shape.cards for shape in recent.recent_workload().shapes} == {1, 2, 4}
    assert recent.restore_window(newest_tasks) == "recent-task window present"


def test_the_plugin_state_job_restores_fgds_window(tenant, fgd_window):
    from scheduling.housekeeping.tickers import plugin_state

    make_task(tenant=tenant, gpu_required=2)

    assert plugin_state() == "fgd: recent-task window rebuilt from 1 task(s)"
    assert [shape.cards for shape in recent.read_window()] == [2]
