"""Probes answer JSON with a status per check; readiness fails, naming the check, when one of them fails."""

import time
import uuid
from dataclasses import replace

import pytest
from django.test import Client

from scheduling import metrics
from scheduling.cycle.run import run_cycle


@pytest.fixture(autouse=True)
def _own_metrics_keys(monkeypatch):
    # Test workers share one Redis: each test reads and writes keys of its own.
    monkeypatch.setattr(metrics, "KEY_PREFIX", f"heteroflow:test-metrics:{uuid.uuid4().hex}:")


def test_healthz_answers_without_touching_anything():
    response = Client().get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"].startswith("max-age=0")


@pytest.mark.django_db
def test_readyz_is_ready_once_a_scheduler_cycle_ran():
    waiting = Client().get("/readyz")
    assert waiting.status_code == 503
    body = waiting.json()
    assert {name: check["status"] for name, check in body["checks"].items()} == {
        "database": "ok", "redis": "ok", "migrations": "ok", "scheduler": "fail"}
    assert body["checks"]["scheduler"]["error"] == "no scheduling cycle finished yet"

    run_cycle()  # an empty cycle counts: the scheduler runs
    ready = Client().get("/readyz")
    assert ready.status_code == 200, ready.json()
    assert ready.json()["status"] == "ok"
    assert ready.json()["checks"]["scheduler"]["limit_seconds"] == 15.0


@pytest.mark.django_db
def test_readyz_fails_when_the_last_cycle_is_older_than_three_periods(settings):
    run_cycle()
    settings.PERIODIC_JOBS = tuple(replace(job, period=0.001) if job.name == "cycle" else job
                                   for job in settings.PERIODIC_JOBS)
    time.sleep(0.01)
    check = Client().get("/readyz").json()["checks"]["scheduler"]
    assert check["status"] == "fail" and "more than" in check["error"]


@pytest.mark.django_db
def test_readyz_names_a_redis_that_does_not_answer(settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = Client().get("/readyz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    # The error's class only: its text (hosts, ports, users) goes to the log, not to anonymous callers.
    assert checks["redis"] == {"status": "fail", "error": "ConnectionError",
                               "duration_ms": checks["redis"]["duration_ms"]}
    assert checks["scheduler"]["status"] == "fail"
    assert checks["database"]["status"] == "ok"


@pytest.mark.django_db
def test_readyz_lists_unapplied_migrations(monkeypatch):
    from django.db.migrations.executor import MigrationExecutor

    from heteroflow_site import health

    real_plan = MigrationExecutor.migration_plan

    def plan_with_one_unapplied(self, targets, clean_start=False):
        node = self.loader.graph.leaf_nodes()[0]
        return [(self.loader.graph.nodes[node], False)] + real_plan(self, targets, clean_start)

    monkeypatch.setattr(health, "_migrations_applied", False)
    monkeypatch.setattr(health.MigrationExecutor, "migration_plan", plan_with_one_unapplied)
    check = Client().get("/readyz").json()["checks"]["migrations"]
    assert check["status"] == "fail" and check["unapplied"] == 1 and check["error"] == "1 unapplied migration(s)"


@pytest.mark.django_db
def test_readyz_builds_the_migration_graph_only_until_every_migration_is_applied(monkeypatch):
    from heteroflow_site import health

    monkeypatch.setattr(health, "_migrations_applied", False)
    built = []
    real_init = health.MigrationExecutor.__init__

    def counting_init(self, *args, **kwargs):
        built.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(health.MigrationExecutor, "__init__", counting_init)
    for _ in range(3):
        assert Client().get("/readyz").json()["checks"]["migrations"]["status"] == "ok"
    assert built == [1]
