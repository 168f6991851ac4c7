"""One bad task never halts a cycle for everyone (issue 13, item 2): an unexpected error while placing a task is
that task's attempt (`InternalError`, logged with its traceback) and the cycle goes on; a non-finite score counts
as 0."""

import logging
import random

import pytest

from scheduling import lifecycle
from scheduling.cycle.run import run_cycle
from scheduling.framework import reasons
from scheduling.models import SchedulingAttempt, Task
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def with_faulty_plugin(settings):
    settings.HETEROFLOW_EXTRA_PLUGINS = ["tests.example_plugins.faulty.factory"]


def test_a_plugin_raising_for_one_task_is_that_tasks_internal_error_and_the_others_bind(
    tenant, with_faulty_plugin, caplog
):
    make_node(cards=4)
    before = make_task(tenant=tenant, gpu_required=1, priority=90)
    broken = make_task(tenant=tenant, gpu_required=1, priority=50, labels={"explode": "true"})
    after = make_task(tenant=tenant, gpu_required=1, priority=10)

    with caplog.at_level(logging.ERROR, logger="scheduling.cycle.run"):
        result = run_cycle()

    assert (result.considered, result.bound, result.failed) == (3, 2, 1)
    assert [Task.objects.get(id=task.id).status for task in (before, broken, after)] == [
        lifecycle.SCHEDULED, lifecycle.PENDING, lifecycle.SCHEDULED]
    attempt = SchedulingAttempt.objects.get(task=broken)
    assert attempt.code == reasons.INTERNAL_ERROR
    assert "RuntimeError" in attempt.message
    logged = [record for record in caplog.records if f"task {broken.id}" in record.getMessage()]
    assert logged and logged[0].exc_info is not None
    assert Task.objects.get(id=broken.id).parked_until is not None  # retried after a backoff, like any failure


@pytest.mark.parametrize("label", ["nan-score", "inf-score"])
def test_a_non_finite_score_counts_as_zero_and_is_logged(tenant, with_faulty_plugin, caplog, label):
    odd = make_node(name="odd", cards=4, labels={label: "true"})
    plain = make_node(name="plain", cards=4)
    task = make_task(tenant=tenant, gpu_required=1)

    with caplog.at_level(logging.WARNING, logger="scheduling.framework.framework"):
        run_cycle(rng=random.Random(1))

    assert Task.objects.get(id=task.id).node_id == plain.id
    scored = {entry["node"]: entry for entry in SchedulingAttempt.objects.get(task=task).node_entries()}
    assert scored[odd.name]["scores"]["faulty"] == 0
    assert any("non-finite" in record.getMessage() for record in caplog.records)
