"""The usage records recounted from the tasks that still exist (design §17.4; `manage.py audit_ledgers`). Reads
only.

Each placement is read from the task's timeline: from an event into `running` to the next event out of the active
states (a placement still holding cards: to the task's `usage_counted_until`), at the task's share and type. A
pending task's earlier placements are left out: returning to the queue forgets the node and card its share was
read from. Per tenant and day: recorded less than the recount means a placement ended unrecorded; recorded more,
on a day since the retention horizon (no task of it can have been deleted yet), means one was counted twice.
"""

from dataclasses import dataclass
from datetime import date, timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from scheduling.fair_share.book import CARD
from scheduling.fair_share.usage import SHARE_SQL
from scheduling.lifecycle import ACTIVE_STATES, PENDING, RUNNING
from scheduling.models import Task, TaskEvent, UsageRecord

# The transition's clock and its timeline row's differ by a moment: this much per placement is no difference.
SECONDS_PER_PLACEMENT = 1.0

_TASK, _EVENT, _USAGE = Task._meta.db_table, TaskEvent._meta.db_table, UsageRecord._meta.db_table

_RECOUNT_SQL = f"""
WITH spans AS (
    SELECT "{_TASK}".tenant_id, ({SHARE_SQL}) / {CARD}.0 AS cards, started.at AS since,
           coalesce((SELECT min(ended.at) FROM "{_EVENT}" ended
                      WHERE ended.task_id = started.task_id AND ended.id > started.id
                        AND ended.to_status <> ALL(%(active)s)),
                    greatest("{_TASK}".usage_counted_until, started.at)) AS until
      FROM "{_EVENT}" started JOIN "{_TASK}" ON "{_TASK}".id = started.task_id
     WHERE started.to_status = %(running)s AND "{_TASK}".status <> %(pending)s
), pieces AS (
    SELECT tenant_id, day::date AS day,
           cards * extract(epoch FROM least(until, (day + interval '1 day') AT TIME ZONE 'UTC')
                                      - greatest(since, day AT TIME ZONE 'UTC')) AS card_seconds
      FROM spans, generate_series(date_trunc('day', since AT TIME ZONE 'UTC'), until AT TIME ZONE 'UTC',
                                  interval '1 day') AS day
     WHERE until > since
), recount AS (
    SELECT tenant_id, day, sum(card_seconds) AS card_seconds, count(*) AS placements
      FROM pieces WHERE card_seconds > 0 GROUP BY tenant_id, day
), recorded AS (
    SELECT tenant_id, day, sum(card_seconds) AS card_seconds FROM "{_USAGE}" GROUP BY tenant_id, day
)
SELECT coalesce(recount.tenant_id, recorded.tenant_id), coalesce(recount.day, recorded.day),
       coalesce(recorded.card_seconds, 0)::float, coalesce(recount.card_seconds, 0)::float,
       coalesce(recount.placements, 0)
  FROM recount FULL JOIN recorded USING (tenant_id, day)
"""


@dataclass(frozen=True)
class UsageDifference:
    tenant_id: int
    day: date
    recorded: float
    recounted: float

    def finding(self) -> str:
        what = "unrecorded placements" if self.recorded < self.recounted else "placements counted twice"
        return (f"usage of {self.day}: {self.recorded:.0f} card-seconds recorded, the tasks account for "
                f"{self.recounted:.0f} ({what})")


def usage_differences() -> list[UsageDifference]:
    horizon = timezone.now().date() - timedelta(days=settings.HETEROFLOW_TASK_RETENTION_DAYS)
    with connection.cursor() as cursor:
        cursor.execute(_RECOUNT_SQL, {"active": sorted(ACTIVE_STATES), "running": RUNNING, "pending": PENDING})
        rows = cursor.fetchall()
    differences = []
    for tenant_id, day, recorded, recounted, placements in rows:
        slack = SECONDS_PER_PLACEMENT * max(placements, 1)
        missing = recorded < recounted - slack
        doubled = recorded > recounted + slack and day > horizon
        if missing or doubled:
            differences.append(UsageDifference(tenant_id, day, recorded, recounted))
    return sorted(differences, key=lambda difference: (difference.tenant_id, difference.day))
