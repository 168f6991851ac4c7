"""Readiness of inference replicas as node agents report it with their heartbeats (design §17.2).

Each report is the latest probe of a replica running on the reporting node: `ready` sets the task's flag (a CAS on
the task still running there, so a late report never marks a replica of another node or one already stopping), and
a replica that was ready and has failed `failure_threshold` probes in a row is restarted: stopped gracefully
through the one stop service, on its timeline, and replaced by the rebuild loop.
"""

import logging
from collections.abc import Iterable

from django.db.models import Q
from django.utils import timezone

from heteroflow_site.errors import DomainError
from scheduling import lifecycle
from scheduling.models import Task
from scheduling.services.task_stop import task_stop

logger = logging.getLogger(__name__)


def readiness_apply(*, node_id: int, reports: Iterable[dict]) -> list[int]:
    """Store the reported readiness; return the ids of the replicas restarted for failing their probe."""
    reports = {report["task"]: report for report in reports}
    if not reports:
        return []
    now = timezone.now()
    running = Task.objects.filter(id__in=list(reports), node_id=node_id, status=lifecycle.RUNNING,
                                  group__readiness__isnull=False)
    ready_ids = [task_id for task_id, report in reports.items() if report["ready"]]
    running.filter(id__in=ready_ids, ready=False).update(ready=True, ready_at=now)
    running.filter(Q(ready=True) & ~Q(id__in=ready_ids)).update(ready=False)
    restarted = []
    for task in running.filter(ready_at__isnull=False).select_related("group").only("id", "group__readiness"):
        report = reports[task.id]
        threshold = int(task.group.readiness.get("failure_threshold") or 3)
        if not report["ready"] and report["failures"] >= threshold:
            try:
                task_stop(task=task, reason=f"restarted: readiness probe failed {report['failures']} times in a row")
            except DomainError:
                continue  # it ended meanwhile
            restarted.append(task.id)
            logger.warning("replica %s: readiness probe failed %s times in a row; restarting it", task.id,
                           report["failures"])
    return restarted
