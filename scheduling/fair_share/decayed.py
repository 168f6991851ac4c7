"""Decayed usage (design §17.4, as Slurm's `PriorityDecayHalfLife`): each tenant's card-seconds, a day's weighing
half as much each `HETEROFLOW_FAIR_SHARE_HALF_LIFE` days, divided by its nominal cards. The `fair-share` queue order
puts the lowest first within a priority.

Recorded days count from their midpoint (today's from between its midnight and now); the stretch of running
placements not yet recorded (since the last midnight at most) counts too, so a tenant that fills the cluster today
moves back today. A tenant's nominal is the sum of its per-type nominal quotas, else its `gpu_quota`; a tenant
without either has no share (infinite) and comes after those with one, by its decayed usage.
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from scheduling.fair_share.book import CARD
from scheduling.fair_share.usage import SHARE_SQL
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, UsageRecord
from tenants.models import Tenant, TenantGpuQuota

# Days older than this many half-lives weigh less than 1/1000 and are not read.
HALF_LIVES_READ = 10
_TASK, _USAGE = Task._meta.db_table, UsageRecord._meta.db_table

# Float arithmetic throughout: `extract(epoch …)` is numeric, and numeric powers cost some 10 µs each.
_DECAYED_SQL = f"""
SELECT tenant_id,
       sum(card_seconds * power(0.5::float8, greatest(extract(epoch FROM %(now)s - middle)::float8, 0) / %(half_life)s))
  FROM (SELECT tenant_id, sum(card_seconds) AS card_seconds,
               least((day + interval '12 hours') AT TIME ZONE 'UTC',
                     (day AT TIME ZONE 'UTC') + (%(now)s - (day AT TIME ZONE 'UTC')) / 2) AS middle
          FROM "{_USAGE}"
         WHERE tenant_id = ANY(%(tenants)s) AND day >= %(oldest)s
         GROUP BY tenant_id, day
        UNION ALL
        SELECT tenant_id, ({SHARE_SQL}) / {CARD}.0 * extract(epoch FROM %(now)s - since)::float8,
               since + (%(now)s - since) / 2
          FROM (SELECT "{_TASK}".*, greatest("{_TASK}".started_at,
                                             coalesce("{_TASK}".usage_counted_until, "{_TASK}".started_at)) AS since
                  FROM "{_TASK}"
                 WHERE "{_TASK}".tenant_id = ANY(%(tenants)s) AND "{_TASK}".status = ANY(%(active)s)
                   AND "{_TASK}".started_at IS NOT NULL) AS "{_TASK}"
         WHERE since < %(now)s) AS weighed
 GROUP BY tenant_id
"""


@dataclass(frozen=True)
class DecayedShare:
    tenant_id: int
    card_seconds: float
    """Decayed card-seconds."""
    nominal: float | None
    """Cards."""

    @property
    def share(self) -> float:
        """Decayed card-hours per nominal card: what the order sorts by."""
        if not self.nominal:
            return math.inf
        return self.card_seconds / 3600 / self.nominal

    @property
    def order_key(self) -> tuple[float, float]:
        return self.share, self.card_seconds


def half_life_seconds() -> float:
    return settings.HETEROFLOW_FAIR_SHARE_HALF_LIFE * 86400


def decayed_shares(tenant_ids, *, now: datetime | None = None) -> dict[int, DecayedShare]:
    """The decayed share of each of `tenant_ids`, in three queries."""
    tenant_ids = sorted({tenant_id for tenant_id in tenant_ids if tenant_id is not None})
    if not tenant_ids:
        return {}
    now = now or timezone.now()
    half_life = half_life_seconds()
    oldest = (now - timedelta(seconds=half_life * HALF_LIVES_READ)).date()
    with connection.cursor() as cursor:
        cursor.execute(_DECAYED_SQL, {"now": now, "half_life": half_life, "tenants": tenant_ids, "oldest": oldest,
                                      "active": sorted(ACTIVE_STATES)})
        used = {tenant_id: float(amount) for tenant_id, amount in cursor.fetchall()}
    nominal = {tenant_id: float(total) for tenant_id, total in TenantGpuQuota.objects.filter(
        tenant_id__in=tenant_ids).values("tenant_id").annotate(total=Sum("nominal")).values_list("tenant_id", "total")}
    for tenant_id, quota in Tenant.objects.filter(id__in=tenant_ids, gpu_quota__isnull=False).values_list(
            "id", "gpu_quota"):
        nominal.setdefault(tenant_id, float(quota))
    return {tenant_id: DecayedShare(tenant_id, used.get(tenant_id, 0.0), nominal.get(tenant_id))
            for tenant_id in tenant_ids}


def decayed_share_listing(*, now: datetime | None = None, limit: int = 50) -> list[dict]:
    """The diagnostics' table: each tenant with a nominal or with usage within the half-lives read, by the order
    `fair-share` gives them."""
    now = now or timezone.now()
    oldest = (now - timedelta(seconds=half_life_seconds() * HALF_LIVES_READ)).date()
    tenant_ids = set(UsageRecord.objects.filter(day__gte=oldest).values_list("tenant_id", flat=True).distinct())
    tenant_ids |= set(TenantGpuQuota.objects.values_list("tenant_id", flat=True).distinct())
    tenant_ids |= set(Tenant.objects.filter(gpu_quota__isnull=False).values_list("id", flat=True))
    shares = sorted(decayed_shares(tenant_ids, now=now).values(), key=lambda share: share.order_key)[:limit]
    names = dict(Tenant.objects.filter(id__in=[share.tenant_id for share in shares]).values_list("id", "name"))
    return [{"tenant": names.get(share.tenant_id, share.tenant_id), "card_hours": share.card_seconds / 3600,
             "nominal": share.nominal, "share": None if share.share == math.inf else share.share}
            for share in shares]
