"""Usage records (design §17.4): the card-seconds of each placement, per tenant, UTC day, GPU type and task type,
added to `UsageRecord` when the placement ends (`task_transition`) and, for placements still holding cards, when
a day turns (the `usage` ticker). A fractional task counts its share of the card (`scheduling.fair_share.usage`).

A placement runs from `started_at` until it leaves the active states. Each recording claims the stretch from the
task's `usage_counted_until` (or its start) to `until` by compare-and-swap on that column, in the same statement
that adds the stretch, cut at each midnight, to the day rows: a replayed transition or a ticker run twice finds
nothing left to claim, and two recorders racing for one task count it once.
"""

from datetime import datetime, time, timezone as dt_timezone

from django.db import connection, transaction
from django.utils import timezone

from scheduling.fair_share.book import CARD
from scheduling.fair_share.usage import SHARE_SQL, TYPE_SQL
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, UsageRecord

# Running tasks a day turn records per transaction.
TICKER_BATCH = 500

_TASK = Task._meta.db_table
_USAGE = UsageRecord._meta.db_table

# `%(where)s` picks the tasks; `until` is where the claimed stretch ends. SKIP LOCKED: a task another transaction
# holds is in the middle of a transition, which records its own placement when it ends it.
_RECORD_SQL = f"""
WITH due AS (
    SELECT "{_TASK}".id, "{_TASK}".tenant_id, "{_TASK}".type AS task_type, {TYPE_SQL} AS gpu_type,
           ({SHARE_SQL}) / {CARD}.0 AS cards,
           greatest("{_TASK}".started_at, coalesce("{_TASK}".usage_counted_until, "{_TASK}".started_at)) AS since,
           "{_TASK}".usage_counted_until AS counted_before
      FROM "{_TASK}"
     WHERE "{_TASK}".started_at IS NOT NULL AND %(where)s
     ORDER BY "{_TASK}".id
     LIMIT %%(limit)s
       FOR UPDATE OF "{_TASK}" SKIP LOCKED
), claimed AS (
    UPDATE "{_TASK}" SET usage_counted_until = %%(until)s
      FROM due
     WHERE "{_TASK}".id = due.id
       AND "{_TASK}".usage_counted_until IS NOT DISTINCT FROM due.counted_before
       AND due.since < %%(until)s
 RETURNING due.*
), pieces AS (
    SELECT claimed.tenant_id, claimed.task_type, claimed.gpu_type, day::date AS day,
           claimed.cards * extract(epoch FROM least(%%(until)s, (day + interval '1 day') AT TIME ZONE 'UTC')
                                                - greatest(claimed.since, day AT TIME ZONE 'UTC')) AS card_seconds
      FROM claimed,
           generate_series(date_trunc('day', claimed.since AT TIME ZONE 'UTC'),
                           %%(until)s AT TIME ZONE 'UTC', interval '1 day') AS day
)
INSERT INTO "{_USAGE}" (tenant_id, day, gpu_type, task_type, card_seconds)
SELECT tenant_id, day, gpu_type, task_type, sum(card_seconds)
  FROM pieces
 WHERE card_seconds > 0
 GROUP BY tenant_id, day, gpu_type, task_type
    ON CONFLICT (tenant_id, day, gpu_type, task_type)
    DO UPDATE SET card_seconds = "{_USAGE}".card_seconds + excluded.card_seconds
RETURNING 1
"""


def _record(*, where: str, params: dict, until: datetime, limit: int | None) -> int:
    """Claims and records the selected placements' stretches up to `until`; the number of day rows touched."""
    with connection.cursor() as cursor:
        cursor.execute(_RECORD_SQL % {"where": where}, {**params, "until": until, "limit": limit})
        return cursor.rowcount


def record_placement_end(*, task_id: int, ended_at: datetime) -> None:
    """The rest of `task_id`'s placement, up to `ended_at`, inside the caller's transaction (`task_transition`,
    which holds the task's row and calls this before it clears `started_at`)."""
    _record(where=f'"{_TASK}".id = %(task_id)s', params={"task_id": task_id}, until=ended_at, limit=1)


def last_midnight(now: datetime | None = None) -> datetime:
    now = now or timezone.now()
    return datetime.combine(now.astimezone(dt_timezone.utc).date(), time.min, tzinfo=dt_timezone.utc)


def record_day_turn(*, now: datetime | None = None, batch: int = TICKER_BATCH) -> int:
    """Every placement still holding cards, recorded up to the last midnight (UTC), `batch` tasks per
    transaction in id order; the number of tasks recorded. Run as often as you like: a day already recorded claims
    nothing."""
    midnight = last_midnight(now)
    where = (f'"{_TASK}".status = ANY(%(active)s) AND "{_TASK}".started_at < %(until)s '
             f'AND "{_TASK}".id BETWEEN %(first)s AND %(last)s')
    recorded, after = 0, 0
    while True:
        ids = list(Task.objects.filter(status__in=ACTIVE_STATES, started_at__lt=midnight, id__gt=after)
                   .exclude(usage_counted_until__gte=midnight).order_by("id")
                   .values_list("id", flat=True)[:batch])
        if not ids:
            return recorded
        with transaction.atomic():
            _record(where=where, params={"active": sorted(ACTIVE_STATES), "first": ids[0], "last": ids[-1]},
                    until=midnight, limit=None)
        recorded += len(ids)
        after = ids[-1]
