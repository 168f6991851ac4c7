"""The autoscaler (design §17.2, the seed's AutoScaler): every 15 s the leader sets each autoscaled inference group's
replica count from the metric its ready replicas report (`autoscale_rule`), from what PostgreSQL holds (so any
scheduler process carries it on). Seed rules: a group a window holds is skipped; an inactive tenant's group is never
scaled up; each new replica is admitted as a manual scale admits it (the tenant's priority ceiling and pending cap
here, its quota when the scheduler places it), and a refusal goes on the group's timeline rather than stalling
silently. Every tick keeps a sample (desired, ready, the summed metric) that the group page draws; every decision
goes on the timeline with its figures."""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from heteroflow_site.errors import DomainError
from scheduling.fair_share.priority import priority_within_ceiling
from scheduling.groups.autoscale_rule import TICK_SECONDS, Decision, decide
from scheduling.groups.replica_state import Replica, replica_ready
from scheduling.groups.replicas import add_replicas, group_priority, live_replicas, set_desired_replicas
from scheduling.groups.scale import locked_group
from scheduling.groups.status import refresh_group_status
from scheduling.groups.timeline import note
from scheduling.housekeeping.isolation import isolated
from scheduling.models import GroupEvent, GroupMetricSample, TaskGroup, TaskType
from scheduling.services.task_create import ensure_pending_capacity

AUTOSCALE_LOCK_KEY = 0x4846_4153  # "HFAS": the autoscaler's leader lock
# A replica's report older than this (four missed 15 s heartbeats) is not counted: its agent may be gone.
METRIC_FRESH_SECONDS = 60
# Samples kept per group: the page draws the last hour; a scale-down looks back at most its delay.
SAMPLE_RETENTION = timedelta(hours=2)
PRUNE_EVERY_SECONDS = 600


@dataclass(frozen=True)
class AutoscaleRun:
    leader: bool
    scaled: tuple[int, ...] = ()


def autoscale_groups(now: datetime | None = None) -> AutoscaleRun:
    """One tick of the autoscaler on one scheduler at a time (a PostgreSQL advisory lock); each group in its own
    transaction."""
    now = now or timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [AUTOSCALE_LOCK_KEY])
            if not cursor.fetchone()[0]:
                return AutoscaleRun(leader=False)
        group_ids = list(TaskGroup.objects.filter(type=TaskType.INFERENCE, autoscale__isnull=False,
                                                  stopped_at__isnull=True).order_by("id").values_list("id", flat=True))
        scaled = [group_id for group_id in group_ids
                  if isolated(lambda: _tick(group_id, now), what=f"autoscaling of group {group_id}")]
    return AutoscaleRun(leader=True, scaled=tuple(scaled))


def _tick(group_id: int, now: datetime) -> bool:
    """Decide for one group; True when its replica count changed."""
    with transaction.atomic():
        group = locked_group(group_id)
        if group.stopped_at is not None or not group.autoscale:
            return False
        if group.window_applied:
            note(group, GroupEvent.Kind.AUTOSCALE, f"autoscaler skips the group: its window holds it at "
                                                   f"{group.window_applied}", figures={}, once=True)
            return False
        spec = group.autoscale
        fresh_after = now - timedelta(seconds=METRIC_FRESH_SECONDS)
        ready = [replica for replica in live_replicas(group) if replica_ready(group, replica)]
        values = [value for value in (replica_metric(replica, fresh_after) for replica in ready) if value is not None]
        delay = timedelta(seconds=spec.get("scale_down_delay_seconds", 300))
        samples = GroupMetricSample.objects.filter(group=group)
        # One read: the delay's proposals and the first tick before them, if any (the group was watched long
        # enough when there is one).
        rows = list(samples.filter(at__gt=now - delay - timedelta(seconds=PRUNE_EVERY_SECONDS))
                    .order_by("at").values_list("at", "proposed"))
        history = [(at, proposed) for at, proposed in rows if at > now - delay]
        watched_since = rows[0][0] if rows and rows[0][0] <= now - delay else (
            samples.order_by("at").values_list("at", flat=True).first() if rows else None)
        current = group.replicas or 0
        decision = decide(current=current, values=values, spec=spec, history=history, watched_since=watched_since,
                          now=now)
        GroupMetricSample.objects.create(group=group, at=now, desired=decision.desired, ready=len(ready),
                                         value=decision.total, proposed=decision.proposed)
        if int(now.timestamp()) % PRUNE_EVERY_SECONDS < TICK_SECONDS:
            samples.filter(at__lt=now - SAMPLE_RETENTION).delete()
        if not decision.changes(current):
            return False
        figures = {"from": current, "to": decision.desired, "sum": round(decision.total, 3),
                   "target": spec["target"], "metric": spec["metric"], "reporting": len(values),
                   "ready": len(ready)}
        if decision.desired > current and not _admit_scale_up(group, decision, figures):
            return False
        _apply(group, decision, current)
        note(group, GroupEvent.Kind.AUTOSCALE,
             f"autoscaled {current} → {decision.desired}: {spec['metric']} Σ {decision.total:g} over "
             f"{len(values)} replica(s), target {spec['target']:g} per replica ({decision.why})", figures=figures)
        refresh_group_status(group.id)
        return True


def replica_metric(replica: Replica, fresh_after: datetime) -> float | None:
    """The replica's value: its members' fresh reports averaged (a multi-node replica's master reports the requests
    it serves, each member its cards' utilisation); None when none reported."""
    values = [member.metric_value for member in replica.members
              if member.metric_value is not None and member.metric_at is not None and member.metric_at >= fresh_after]
    return sum(values) / len(values) if values else None


def _admit_scale_up(group: TaskGroup, decision: Decision, figures: dict) -> bool:
    """The seed's rules for new replicas; a refusal goes on the timeline (once while it lasts)."""
    adding = (decision.desired - (group.replicas or 0)) * group.nodes_per_replica
    try:
        if not group.tenant.is_active:
            raise DomainError(f"tenant {group.tenant.name!r} is inactive", field="tenant")
        priority_within_ceiling(tenant=group.tenant, priority=group_priority(group))
        ensure_pending_capacity(tenant=group.tenant, adding=adding)
    except DomainError as refusal:
        note(group, GroupEvent.Kind.REFUSED, f"autoscaler wanted {decision.desired} replica(s) but no scale-up: "
                                             f"{refusal}", figures=figures, once=True)
        return False
    return True


def _apply(group: TaskGroup, decision: Decision, current: int) -> None:
    if decision.desired > current:
        live = live_replicas(group)
        add_replicas(group, decision.desired - len(live), live=live)
    else:
        set_desired_replicas(group, decision.desired,
                             reason=f"autoscaled down to {decision.desired} replica(s)")
    TaskGroup.objects.filter(id=group.id, replicas=current).update(replicas=decision.desired)
