"""Attempt records, code counts and fragmentation (design §12)."""

import pytest

from scheduling.diagnostics.attempts import AttemptBatch, attempt_counts
from scheduling.diagnostics.cluster_view import fragmentation
from scheduling.models import AttemptCodeCount, SchedulingAttempt
from scheduling.cache.snapshot_builder import build_snapshot
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


def record_attempt(task_id: int, code: str, message: str, nodes=None, extra=None) -> None:
    batch = AttemptBatch()
    batch.add(task_id, code, message, nodes, extra)
    batch.flush()


def test_the_latest_attempt_replaces_the_previous_one_and_every_attempt_is_counted(tenant):
    task = make_task(tenant=tenant, gpu_required=1)
    record_attempt(task.id, "InsufficientResources", "0/1 nodes are available: 1 Insufficient GPU.",
                   {"filtered": {"Insufficient GPU": ["a"]}, "plugins": [], "scored": []})
    record_attempt(task.id, "Scheduled", "1/1 nodes are available.",
                   {"filtered": {}, "plugins": ["spread"], "scored": [["a", 90.0, 90.0]]}, {"bound": "bound to a"})

    attempt = SchedulingAttempt.objects.get(task=task)
    assert (attempt.code, attempt.node_entries(), attempt.extra) == (
        "Scheduled", [{"node": "a", "reason": None, "scores": {"spread": 90.0}, "total": 90.0}], {"bound": "bound to a"})
    assert attempt_counts() == {"InsufficientResources": 1, "Scheduled": 1}


def test_a_batch_writes_many_attempts_at_once_and_skips_tasks_deleted_meanwhile(tenant):
    kept, deleted = make_task(tenant=tenant), make_task(tenant=tenant)
    batch = AttemptBatch()
    batch.add(kept.id, "NoSchedulableNodes", "0/0 nodes are available.")
    batch.add(deleted.id, "NoSchedulableNodes", "0/0 nodes are available.")
    batch.count("BindConflict")
    deleted.delete()

    batch.flush()

    assert list(SchedulingAttempt.objects.values_list("task_id", flat=True)) == [kept.id]
    assert dict(AttemptCodeCount.objects.values_list("code", "count")) == {"NoSchedulableNodes": 2, "BindConflict": 1}


def _stored_out_of_line() -> set[int]:
    """The ids of the values stored in the attempts' TOAST table (the per-node entries of large attempts)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT reltoastrelid::regclass FROM pg_class WHERE oid = %s::regclass",
                       [SchedulingAttempt._meta.db_table])
        cursor.execute(f"SELECT DISTINCT chunk_id::bigint FROM {cursor.fetchone()[0]}")
        return {row[0] for row in cursor.fetchall()}


def test_an_attempt_that_failed_the_same_way_again_keeps_its_stored_node_entries(tenant):
    import secrets

    task = make_task(tenant=tenant, gpu_required=1)
    # Names that do not compress: the entries stay large enough to be stored out of line, as on a large cluster.
    names = [secrets.token_hex(16) for _ in range(200)]
    failed = {"filtered": {"Insufficient GPU": names}, "plugins": [], "scored": []}
    message = "0/200 nodes are available: 200 Insufficient GPU."
    record_attempt(task.id, "InsufficientResources", message, failed)
    first = SchedulingAttempt.objects.get(task=task)
    stored = _stored_out_of_line()
    assert len(stored) == 1

    record_attempt(task.id, "InsufficientResources", message, failed)

    again = SchedulingAttempt.objects.get(task=task)
    assert again.at > first.at and again.nodes == failed
    assert _stored_out_of_line() == stored, "the unchanged entries were written again"
    changed = {**failed, "filtered": {"Insufficient GPU": names[1:]}}
    record_attempt(task.id, "InsufficientResources", message, changed)
    assert SchedulingAttempt.objects.get(task=task).nodes == changed
    assert len(_stored_out_of_line() - stored) == 1


def node_with_card_0_busy(tenant, cards: int):
    node = make_node(cards=cards)
    make_task(tenant=tenant, status="running", node=node, gpus=[0], gpu_required=1)
    node.gpu_used = 1
    node.save()
    return node


def test_fragmentation_counts_the_cards_a_k_card_task_could_use(tenant):
    node_with_card_0_busy(tenant, 4)
    make_node(cards=8)
    make_node(cards=2, status="offline")

    figures = fragmentation(build_snapshot())
    assert (figures["free_cards"], figures["usable"]) == (11, {1: 11, 2: 10, 4: 8, 8: 8})


def test_fgd_fragment_is_the_idle_capacity_the_recent_shapes_cannot_use(tenant, fgd_window):
    # Recent tasks: three 2-card tasks and one 1-card task. A node with 1 free card can host only the 1-card shape:
    # F = 3/4 · 1 card. A node with 3 free cards hosts both: F = 0. The offline node does not count.
    node_with_card_0_busy(tenant, 2)
    make_node(cards=3)
    make_node(cards=2, status="offline")
    for cards in (2, 2, 2, 1):
        fgd_window(make_task(tenant=tenant, gpu_required=cards))

    assert fragmentation(build_snapshot())["fgd"] == {"fragmented": 0.75, "idle": 4.0, "shapes": 2, "tasks": 4}
