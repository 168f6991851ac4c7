"""The dashboard's history: a point a minute of what the cluster holds, kept for a day, so that an admin sees
trends without an external time-series store."""

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Avg, CharField, Count, DateTimeField, F, Func, Sum, Value
from django.utils import timezone

from nodes.models import GPU
from scheduling import lifecycle
from scheduling.models import ClusterSample, CycleRecord, Task

HISTORY_KEEP = timedelta(hours=24)
# Points drawn per chart at most: one per 6 minutes of the day.
HISTORY_POINTS = 240


def cluster_sample_record(*, now: datetime | None = None) -> ClusterSample:
    """Writes one point and drops the points older than HISTORY_KEEP, so the table stays at about a day of rows."""
    now = now or timezone.now()
    previous = ClusterSample.objects.order_by("-at").values_list("at", flat=True).first()
    cycles = CycleRecord.objects.filter(started_at__gt=previous or now - timedelta(minutes=1), started_at__lte=now)
    totals = dict(GPU.objects.values_list("type").annotate(n=Count("id")).order_by())
    used = dict(Task.objects.filter(status__in=lifecycle.ACTIVE_STATES).exclude(card_type="")
                .values_list("card_type").annotate(n=Sum("gpu_required")).order_by())
    with transaction.atomic():
        sample = ClusterSample.objects.create(
            at=now, gpu_total=totals, gpu_used={gpu_type: used.get(gpu_type, 0) for gpu_type in totals},
            pending=Task.objects.filter(status=lifecycle.PENDING).count(),
            cycle_ms=cycles.aggregate(mean=Avg("duration_ms"))["mean"])
        ClusterSample.objects.filter(at__lt=now - HISTORY_KEEP).delete()
    return sample


def cluster_history(*, since: datetime, points: int = HISTORY_POINTS) -> list[ClusterSample]:
    """The points since `since`, at most `points` of them: the latest of each equal slice of the span (a day of
    minutely points is thinned in PostgreSQL, so a page draws a few hundred, not 1,440)."""
    slice_seconds = max(int((timezone.now() - since).total_seconds() // points), 1)
    bucket = Func(Value(f"{slice_seconds} seconds", output_field=CharField()), F("at"), Value(since),
                  function="date_bin", template="date_bin(%(expressions)s)", output_field=DateTimeField())
    thinned = (ClusterSample.objects.filter(at__gte=since).annotate(bucket=bucket)
               .order_by("bucket", "-at", "-id").distinct("bucket"))
    return sorted(thinned, key=lambda sample: (sample.at, sample.id))
