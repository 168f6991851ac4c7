"""The autoscaling metric of each replica as node agents report it with their heartbeats (design §17.2)."""

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Case, FloatField, Value, When
from django.utils import timezone

from scheduling import lifecycle
from scheduling.models import Task


def replica_metrics_apply(*, node_id: int, reports: Iterable[dict], at: datetime | None = None) -> int:
    """Store each reported value on its replica, in one UPDATE limited to the autoscaled replicas running on the
    reporting node (a late report never lands on a replica of another node or one already stopping). Returns how
    many replicas took a value. `at`: when the values were read (now; a simulation's clock)."""
    values = {report["task"]: report["value"] for report in reports}
    if not values:
        return 0
    return Task.objects.filter(id__in=list(values), node_id=node_id, status=lifecycle.RUNNING,
                               group__autoscale__isnull=False).update(
        metric_value=Case(*(When(id=task_id, then=Value(value)) for task_id, value in values.items()),
                          output_field=FloatField()),
        metric_at=at or timezone.now())
