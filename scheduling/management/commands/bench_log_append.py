"""What one log batch costs the database (design §17.4): the WAL bytes written per 64 KiB batch appended to a task
whose kept tail is already full, measured around each append:

    manage.py bench_log_append [--batches 30] [--batch-kib 64]

Runs against the configured database on a task of its own, deleted afterwards. WAL is the server's: another
session's writes during an append count too, so the minimum is the figure to read.
"""

import os
import statistics

from django.core.management.base import BaseCommand
from django.db import connection

from nodes.models import Node
from scheduling.models import Task
from scheduling.services.task_logs import TASK_LOG_MAX_BYTES, task_log_append
from tenants.models import Tenant


def _wal_position() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()")
        return cursor.fetchone()[0]


def _wal_since(position: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), %s)", [position])
        return int(cursor.fetchone()[0])


class Command(BaseCommand):
    help = "WAL bytes written per log batch appended to a task with a full kept tail."

    def add_arguments(self, parser):
        parser.add_argument("--batches", type=int, default=30)
        parser.add_argument("--batch-kib", type=int, default=64)

    def handle(self, *args, batches: int, batch_kib: int, **options):
        tenant = Tenant.objects.create(name=f"bench-log-{os.getpid()}")
        node = Node.objects.create(name=f"bench-log-{os.getpid()}", gpu_total=0)
        task = Task.objects.create(tenant=tenant, name="bench-log", node=node, status="running")
        try:
            # Incompressible bytes: what TOAST compression would hide of text is counted in full.
            batch = os.urandom(batch_kib * 1024)
            for _ in range(TASK_LOG_MAX_BYTES // len(batch) + 1):
                task_log_append(node=node, task_id=task.id, data=batch)
            written = []
            for _ in range(batches):
                position = _wal_position()
                task_log_append(node=node, task_id=task.id, data=batch)
                written.append(_wal_since(position))
        finally:
            task.delete()
            node.delete()
            tenant.delete()
        self.stdout.write(f"batch={batch_kib} KiB kept_tail={TASK_LOG_MAX_BYTES // 1024} KiB batches={batches} "
                          f"wal_bytes_per_batch min={min(written)} median={statistics.median(written):.0f}")
