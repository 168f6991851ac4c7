"""A log batch is written once (design §17.4): appending to a full kept tail writes the batch, not the tail."""

from io import StringIO

import pytest
from django.core.management import call_command

from scheduling.models import TaskLogChunk
from scheduling.services import task_logs
from scheduling.services.log_reading import task_log_slice
from tests.factories import make_node, make_task


@pytest.mark.django_db
def test_appending_to_a_full_tail_writes_about_the_batch_not_the_whole_tail():
    out = StringIO()
    call_command("bench_log_append", "--batches", "8", stdout=out)

    least = int(out.getvalue().split("min=")[1].split()[0])
    # The single-row log wrote some 1.15 MB of WAL per 64 KiB batch; the chunked one, the batch and its rows.
    assert 64 * 1024 < least < 2 * 64 * 1024


@pytest.mark.django_db
def test_chunks_before_the_kept_tail_are_deleted_and_reads_cut_the_first_kept_one(monkeypatch, tenant):
    monkeypatch.setattr(task_logs, "TASK_LOG_MAX_BYTES", 10)
    node = make_node()
    task = make_task(tenant=tenant, node=node, status="running")
    for batch in (b"abcd", b"efgh", b"ijkl", b"mnop"):
        task_logs.task_log_append(node=node, task_id=task.id, data=batch)

    assert list(TaskLogChunk.objects.filter(task=task).order_by("start_offset")
                .values_list("start_offset", flat=True)) == [4, 8, 12]
    piece = task_log_slice(task_id=task.id)
    assert (piece.text, piece.dropped_bytes, piece.end_offset) == ("ghijklmnop", 6, 16)
    assert task_log_slice(task_id=task.id, offset=13).text == "nop"
    assert task_log_slice(task_id=task.id, offset=99).text == ""
