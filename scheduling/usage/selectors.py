"""Reading the usage records (design §17.4): card-seconds summed over a range of days, grouped by any of tenant,
GPU type, task type and day; a tenant reads only its own."""

from dataclasses import dataclass
from datetime import date, timedelta

from django.db.models import Aggregate, Count, ExpressionWrapper, F, FloatField, QuerySet, Sum
from django.db.models.functions import Extract, TruncDate

from heteroflow_site.permissions import is_admin
from scheduling.models import UsageRecord
from scheduling.selectors import tasks_visible_to as _tasks_visible_to
from tenants.selectors import tenant_of

GROUP_KEYS = ("tenant", "gpu_type", "task_type", "day")
MAX_RANGE_DAYS = 400
DEFAULT_RANGE_DAYS = 30
_COLUMNS = {"tenant": "tenant__name", "gpu_type": "gpu_type", "task_type": "task_type", "day": "day"}


@dataclass(frozen=True)
class UsageQuery:
    day_from: date
    day_to: date
    group_by: tuple[str, ...]


def default_range(today: date) -> tuple[date, date]:
    return today - timedelta(days=DEFAULT_RANGE_DAYS - 1), today


def usage_records_visible_to(user) -> QuerySet[UsageRecord]:
    """Every record for an admin, the user's tenant's own otherwise (none without a tenant)."""
    if is_admin(user):
        return UsageRecord.objects.all()
    tenant = tenant_of(user)
    return UsageRecord.objects.filter(tenant=tenant) if tenant else UsageRecord.objects.none()


def usage_rows(*, user, query: UsageQuery) -> list[dict]:
    """One row per group: its keys, `card_seconds` and `card_hours`, ordered by the keys."""
    columns = [_COLUMNS[key] for key in query.group_by]
    rows = (usage_records_visible_to(user).filter(day__gte=query.day_from, day__lte=query.day_to)
            .values(*columns).annotate(card_seconds=Sum("card_seconds")).order_by(*columns))
    named = []
    for row in rows:
        out = {key: row[_COLUMNS[key]] for key in query.group_by}
        out["card_seconds"] = round(row["card_seconds"], 3)
        out["card_hours"] = round(row["card_seconds"] / 3600, 3)
        named.append(out)
    return named


def time_to_start_by_day(*, user, day_from: date, day_to: date) -> list[dict]:
    """Per UTC day a task started running in: how many did, and the p50 and p99 of their submission → running
    seconds. Read from the tasks, so as far back as retention keeps them; a task that ran twice counts its last
    start."""
    tasks = _tasks_visible_to(user).filter(started_at__date__gte=day_from, started_at__date__lte=day_to)
    waited = ExpressionWrapper(Extract(F("started_at") - F("created_at"), "epoch"), output_field=FloatField())
    rows = (tasks.annotate(day=TruncDate("started_at"), waited=waited).values("day")
            .annotate(started=Count("id"), p50=Percentile(0.5, "waited"), p99=Percentile(0.99, "waited"))
            .order_by("day"))
    return list(rows)


class Percentile(Aggregate):
    """PostgreSQL's continuous percentile of an expression."""

    template = "percentile_cont(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, fraction: float, expression, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)
