"""Retention (design §17.4): what the control plane keeps of finished work, bounded in time and per tenant.

- Finished tasks older than `HETEROFLOW_TASK_RETENTION_DAYS` (by when they finished) are deleted with their
  attempt, timeline and log; then the groups left without members that ended as long ago. The usage records
  hold no task, and stay.
- Each tenant's kept log bytes are capped at `HETEROFLOW_TENANT_LOG_BYTES`: over it, the logs of its finished
  tasks are dropped, the ones that finished first first, until it is under. A running task's log is bounded by
  the per-task cap (`scheduling.services.task_logs`) and is not dropped.

Each step works in batches of RETENTION_BATCH tasks, one transaction each: never one transaction over everything
that is due, which would hold locks and bloat one commit as the database grows.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Sum
from django.utils import timezone

from scheduling.lifecycle import TERMINAL_STATES
from scheduling.models import Task, TaskGroup, TaskLog, TaskLogChunk

RETENTION_BATCH = 500
_GROUP_ENDED = (TaskGroup.Status.SUCCEEDED, TaskGroup.Status.FAILED, TaskGroup.Status.STOPPED)


@dataclass(frozen=True)
class RetentionRun:
    tasks_deleted: int
    groups_deleted: int
    logs_dropped: int
    log_bytes_dropped: int

    def summary(self) -> str:
        return (f"{self.tasks_deleted} finished task(s) and {self.groups_deleted} group(s) past retention deleted, "
                f"{self.logs_dropped} log(s) ({self.log_bytes_dropped} bytes) dropped over tenants' log budgets")


def delete_expired_tasks(*, now: datetime | None = None, batch: int = RETENTION_BATCH) -> tuple[int, int]:
    """(tasks, groups) deleted: finished before the retention horizon, a batch per transaction."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.HETEROFLOW_TASK_RETENTION_DAYS)
    tasks = 0
    while True:
        with transaction.atomic():
            ids = list(Task.objects.filter(status__in=TERMINAL_STATES, finished_at__lt=cutoff)
                       .order_by("id").values_list("id", flat=True)[:batch])
            if ids:
                # Only tasks still finished: a CAS on the status, in case one was re-queued meanwhile (it is not).
                Task.objects.filter(id__in=ids, status__in=TERMINAL_STATES).delete()
        tasks += len(ids)
        if len(ids) < batch:
            break
    groups = 0
    while True:
        with transaction.atomic():
            ids = list(TaskGroup.objects.filter(status__in=_GROUP_ENDED, created_at__lt=cutoff, members__isnull=True)
                       .order_by("id").values_list("id", flat=True)[:batch])
            if ids:
                TaskGroup.objects.filter(id__in=ids, members__isnull=True).delete()
        groups += len(ids)
        if len(ids) < batch:
            return tasks, groups


def tenant_log_bytes() -> dict[int, int]:
    """Kept log bytes per tenant."""
    return {tenant_id: kept for tenant_id, kept in TaskLog.objects.values("task__tenant_id")
            .annotate(kept=Sum(F("end_offset") - F("dropped_bytes"))).values_list("task__tenant_id", "kept")}


def cap_tenant_logs(*, batch: int = RETENTION_BATCH) -> tuple[int, int]:
    """(logs, bytes) dropped so that each tenant keeps at most its log budget, oldest finished tasks first."""
    budget = settings.HETEROFLOW_TENANT_LOG_BYTES
    logs = dropped = 0
    for tenant_id, kept in tenant_log_bytes().items():
        excess = kept - budget
        while excess > 0:
            candidates = list(
                TaskLog.objects.filter(task__tenant_id=tenant_id, task__status__in=TERMINAL_STATES,
                                       end_offset__gt=F("dropped_bytes"))
                .order_by("task__finished_at", "task_id")
                .values_list("task_id", "end_offset", "dropped_bytes")[:batch])
            if not candidates:
                break
            chosen = []
            for task_id, end_offset, dropped_bytes in candidates:
                if excess <= 0:
                    break
                chosen.append(task_id)
                excess -= end_offset - dropped_bytes
                dropped += end_offset - dropped_bytes
            with transaction.atomic():
                TaskLogChunk.objects.filter(task_id__in=chosen).delete()
                # The offsets stay: a follower's next read starts where it was and finds nothing dropped silently.
                logs += TaskLog.objects.filter(task_id__in=chosen).update(dropped_bytes=F("end_offset"))
    return logs, dropped


def apply_retention(*, now: datetime | None = None) -> RetentionRun:
    tasks, groups = delete_expired_tasks(now=now)
    logs, dropped = cap_tenant_logs()
    return RetentionRun(tasks_deleted=tasks, groups_deleted=groups, logs_dropped=logs, log_bytes_dropped=dropped)
