"""`TaskGroup.status` derived from the members of the current run (design §15.5)."""

import pytest

from scheduling.groups.status import derive_group_status

TRAINING = {"type": "training", "world_size": 2, "restarts": 0, "max_restarts": 3, "replicas": None,
            "tenant_active": True}


@pytest.mark.parametrize(("members", "expected"), [
    ([], "pending"),
    (["pending", "pending"], "pending"),
    (["scheduled", "scheduled"], "scheduled"),
    (["running", "scheduled"], "scheduled"),
    (["running", "running"], "running"),
    (["running", "succeeded"], "running"),
    (["succeeded", "succeeded"], "succeeded"),
    (["succeeded", "stopped"], "stopped"),
    (["failed", "running"], "restarting"),
    (["pending", "running"], "restarting"),
    (["failed", "stopped"], "restarting"),
])
def test_training_gangs(members, expected):
    assert derive_group_status(members=[(status, "") for status in members], **TRAINING) == expected


def test_a_restarted_gang_is_restarting_until_it_runs_again():
    restarted = {**TRAINING, "restarts": 1}
    assert derive_group_status(members=[("pending", "")] * 2, **restarted) == "restarting"
    assert derive_group_status(members=[("scheduled", ""), ("running", "")], **restarted) == "restarting"
    assert derive_group_status(members=[("running", "")] * 2, **restarted) == "running"


@pytest.mark.parametrize(("changes", "reason", "expected"), [
    ({"restarts": 3}, "NodeLost", "failed"),
    ({}, "Timeout", "failed"),
    ({"tenant_active": False}, "NodeLost", "failed"),
    ({"world_size": 1}, "exit code 1", "failed"),
    ({"restarts": 2}, "exit code 1", "restarting"),
])
def test_a_failure_without_a_restart_left_fails_the_group_at_once(changes, reason, expected):
    members = [("failed", reason), ("stopping", "")]
    assert derive_group_status(members=members, **{**TRAINING, **changes}) == expected


@pytest.mark.parametrize(("members", "replicas", "expected"), [
    (["running", "pending"], 2, "running"),
    (["scheduled", "failed"], 2, "scheduled"),
    (["pending"], 1, "pending"),
    (["failed"], 1, "pending"),
    (["stopped", "stopped"], 0, "stopped"),
    ([], 2, "pending"),
])
def test_inference_groups(members, replicas, expected):
    derived = derive_group_status(type="inference", world_size=1, restarts=0, max_restarts=3, replicas=replicas,
                                  tenant_active=True, members=[(status, "") for status in members])
    assert derived == expected
