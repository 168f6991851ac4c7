"""Plugins are told of created tasks through their SPEC (`on_tasks_created`), not by core code knowing them."""

import logging

import pytest

from scheduling.framework.registry import CONFIG, PluginSpec
from scheduling.services.task_create import task_create

pytestmark = pytest.mark.django_db

SEEN: list[int] = []


def _note(tasks):
    SEEN.extend(task.id for task in tasks)


def _fail(tasks):
    raise RuntimeError("bookkeeping store down")


NOTING = PluginSpec("noting", lambda setting: object(), kinds=frozenset({CONFIG}), on_tasks_created=_note)
FAILING = PluginSpec("failing", lambda setting: object(), kinds=frozenset({CONFIG}), on_tasks_created=_fail)


def test_a_plugin_is_told_of_each_task_once_its_creation_commits(settings, tenant,
                                                                  django_capture_on_commit_callbacks):
    settings.HETEROFLOW_EXTRA_PLUGINS = ["tests.scheduling.plugins.test_tasks_created_hook.NOTING"]
    SEEN.clear()
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        task = task_create(tenant=tenant, name="a")
    assert SEEN == []
    for callback in callbacks:
        callback()
    assert SEEN == [task.id]


def test_a_failing_plugin_costs_its_bookkeeping_not_the_task(settings, tenant, caplog,
                                                             django_capture_on_commit_callbacks):
    settings.HETEROFLOW_EXTRA_PLUGINS = ["tests.scheduling.plugins.test_tasks_created_hook.FAILING"]
    with caplog.at_level(logging.WARNING), django_capture_on_commit_callbacks(execute=True):
        task = task_create(tenant=tenant, name="a")
    assert task.pk is not None
    assert f"plugin failing could not take note of task(s) {task.id}" in caplog.text
