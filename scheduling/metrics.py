"""Prometheus metrics for the on-call questions, visible from any web process however many processes feed them.

Cycles run in Celery workers and scheduler loops, requests in web processes, each maybe in its own container or pod:
in-process counters would each see a part, and prometheus-client's multiprocess mode only joins processes that share
one directory on one host. So nothing is kept in process memory:
- state (nodes by status, pending work by tenant and priority band, parked tasks, heartbeat ages, ledgers, attempts
  by code, CAS conflicts) is read from PostgreSQL at scrape time: it is the truth, and it survives restarts;
- events (cycle durations, binds, queue latencies, ledger corrections) are added to Redis hashes with atomic
  HINCRBY by whichever process sees them, and read back at scrape time. A Redis restart resets them, which
  Prometheus' rate() and increase() treat as a counter reset.
A lost Redis write never fails the work that reported it: metrics are best effort, the database is not.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable
from datetime import datetime

from django.conf import settings
from django.db.models import Case, Count, Q, Value, When
from django.utils import timezone
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from heteroflow_site.health import ProbeFailure
from nodes.models import Node
from nodes.selectors import capacity_by_architecture, card_health_counts
from scheduling.fair_share.book import CARD
from scheduling.fair_share.quotas import load_quota_book
from scheduling.framework import reasons
from scheduling.groups.replica_state import LIVE_STATES, ready_replica_count
from scheduling.models import AttemptCodeCount, CycleRecord, Task, TaskGroup, TaskStatus
from tenants.models import Tenant

logger = logging.getLogger(__name__)

KEY_PREFIX = "heteroflow:metrics:"
CYCLE_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
QUEUE_SECONDS_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 24 * 3600.0)
# Priorities run 0–100 (design §3, default 50): the bands an on-call page groups the backlog by.
PRIORITY_BANDS = (("high", 70), ("normal", 30), ("low", None))
# Attempt outcomes after which a pending task still waits to be placed (until the backoff queue gives it a state).
PLACED_CODES = (reasons.SCHEDULED, *reasons.VICTIMS_STOPPING, reasons.BIND_CONFLICT)
SCHEDULER_PERIODS_ALLOWED = 3


class _Histogram:
    """A histogram kept in one Redis hash: a field per bucket (not cumulative), `sum` and `count`."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...]):
        self.name, self.documentation, self.buckets = name, documentation, buckets

    @property
    def key(self) -> str:
        return KEY_PREFIX + self.name

    def add(self, pipe, values: Iterable[float]) -> None:
        values = list(values)
        for value in values:
            pipe.hincrby(self.key, str(bisect.bisect_left(self.buckets, value)), 1)
        if values:
            pipe.hincrbyfloat(self.key, "sum", sum(values))
            pipe.hincrby(self.key, "count", len(values))

    def family(self, stored: dict[bytes, bytes]) -> HistogramMetricFamily:
        counts = [int(stored.get(str(index).encode(), 0)) for index in range(len(self.buckets) + 1)]
        cumulative, running = [], 0
        for bound, count in zip([*map(str, self.buckets), "+Inf"], counts):
            running += count
            cumulative.append((bound, running))
        return HistogramMetricFamily(self.name, self.documentation, buckets=cumulative,
                                     sum_value=float(stored.get(b"sum", 0)))


class _LabelledHistogram(_Histogram):
    """`_Histogram` per label values, all in one Redis hash: fields `<labels>\t<bucket>`, `<labels>\tsum`,
    `<labels>\tcount`, the label values joined by tabs."""

    def __init__(self, name: str, documentation: str, buckets: tuple[float, ...], labels: tuple[str, ...]):
        super().__init__(name, documentation, buckets)
        self.labels = labels

    def add_labelled(self, pipe, label_values: tuple[str, ...], value: float) -> None:
        prefix = "\t".join(label_values)
        pipe.hincrby(self.key, f"{prefix}\t{bisect.bisect_left(self.buckets, value)}", 1)
        pipe.hincrbyfloat(self.key, f"{prefix}\tsum", value)
        pipe.hincrby(self.key, f"{prefix}\tcount", 1)

    def family(self, stored: dict[bytes, bytes]) -> HistogramMetricFamily:
        by_labels: dict[tuple[str, ...], dict[bytes, bytes]] = {}
        for field, value in stored.items():
            *label_values, last = field.decode().split("\t")
            by_labels.setdefault(tuple(label_values), {})[last.encode()] = value
        family = HistogramMetricFamily(self.name, self.documentation, labels=list(self.labels))
        for label_values, fields in sorted(by_labels.items()):
            running, cumulative = 0, []
            for index, bound in enumerate([*map(str, self.buckets), "+Inf"]):
                running += int(fields.get(str(index).encode(), 0))
                cumulative.append((bound, running))
            family.add_metric(list(label_values), cumulative, sum_value=float(fields.get(b"sum", 0)))
        return family


CYCLE_DURATION = _Histogram("heteroflow_cycle_duration_seconds", "Duration of scheduling cycles that had work",
                            CYCLE_SECONDS_BUCKETS)
QUEUE_LATENCY = _Histogram("heteroflow_queue_latency_seconds", "Time from submission to bind, per bound task",
                           QUEUE_SECONDS_BUCKETS)
# Seed 004's metric to watch (design §17.4): submission to running, per GPU type and size class.
TIME_TO_START = _LabelledHistogram("heteroflow_time_to_start_seconds",
                                   "Time from submission to running, per GPU type and size class",
                                   QUEUE_SECONDS_BUCKETS, labels=("gpu_type", "size"))


def size_class(gpu_required: int) -> str:
    """The size class a task's time to start is told by: a card's share, one card, 2–4, 5–8, more."""
    if gpu_required <= 0:
        return "fraction"
    if gpu_required == 1:
        return "1"
    return "2-4" if gpu_required <= 4 else "5-8" if gpu_required <= 8 else "9+"


def record_start(*, gpu_type: str, gpu_required: int, seconds: float) -> None:
    """A task started running `seconds` after it was submitted."""
    try:
        pipe = _redis().pipeline(transaction=False)
        TIME_TO_START.add_labelled(pipe, (gpu_type or "any", size_class(gpu_required)), max(seconds, 0.0))
        pipe.execute()
    except Exception:
        logger.debug("time to start not recorded", exc_info=True)


def _counters_key() -> str:
    return KEY_PREFIX + "counters"


def _last_cycle_key() -> str:
    return KEY_PREFIX + "last_cycle_at"


def _redis():
    from scheduling.queue import immediate_queue

    return immediate_queue.connection()


def record_cycle(*, duration_seconds: float | None, bound: int = 0, queue_latencies: Iterable[float] = ()) -> None:
    """A scheduling cycle ended: when (readiness), how long (None: it found no work), what it bound and how long
    each bound task had waited."""
    try:
        pipe = _redis().pipeline(transaction=False)
        pipe.set(_last_cycle_key(), timezone.now().timestamp())
        if duration_seconds is not None:
            CYCLE_DURATION.add(pipe, [duration_seconds])
        if bound:
            pipe.hincrby(_counters_key(), "binds", bound)
        QUEUE_LATENCY.add(pipe, queue_latencies)
        pipe.execute()
    except Exception:
        logger.debug("cycle metrics not recorded", exc_info=True)


def record_ledger_corrections(ledger: str, count: int = 1) -> None:
    """A recount found a stored ledger (`node_gpu_used`, `tenant_gpu_used`, ...) wrong and corrected it."""
    try:
        _redis().hincrby(_counters_key(), f"ledger_corrections:{ledger}", count)
    except Exception:
        logger.debug("ledger correction not counted", exc_info=True)


def last_cycle_stamp() -> str | None:
    """The end of the last cycle of any process as Redis keeps it: what changes once per cycle (the generation the
    preemption plan is cached under); None when none has since Redis started."""
    stamp = _redis().get(_last_cycle_key())
    return stamp.decode() if isinstance(stamp, bytes) else stamp


def last_cycle_at() -> datetime | None:
    """When a scheduler last finished a cycle, from any process; None when none has since Redis started."""
    stamp = last_cycle_stamp()
    return datetime.fromtimestamp(float(stamp), tz=timezone.get_current_timezone()) if stamp else None


def check_scheduler() -> dict:
    """Readiness: some process finished a scheduling cycle within three periods of the scheduling tick."""
    period = next(job.period for job in settings.PERIODIC_JOBS if job.name == "cycle")
    limit = SCHEDULER_PERIODS_ALLOWED * period
    last = last_cycle_at()
    if last is None:
        raise ProbeFailure("no scheduling cycle finished yet", limit_seconds=limit)
    age = round((timezone.now() - last).total_seconds(), 3)
    if age > limit:
        raise ProbeFailure(f"last cycle {age:.0f}s ago, more than {limit:.0f}s", last_cycle_seconds_ago=age,
                           limit_seconds=limit)
    return {"last_cycle_seconds_ago": age, "limit_seconds": limit}


def priority_band() -> Case:
    whens = [When(priority__gte=floor, then=Value(name)) for name, floor in PRIORITY_BANDS if floor is not None]
    return Case(*whens, default=Value(PRIORITY_BANDS[-1][0]))


def _ready_multi_node_replicas(group: TaskGroup) -> int:
    """A multi-node replica is ready only with every member running (design §17.1): counted from its members."""
    return ready_replica_count(group, group.members.filter(status__in=LIVE_STATES))


class ClusterCollector:
    def collect(self):
        yield from self._nodes()
        yield from self._tasks()
        yield from self._sharing()
        yield from self._attempts()
        yield from self._events()
        yield from self._groups()

    def _groups(self):
        replicas = GaugeMetricFamily("heteroflow_group_replicas",
                                     "Replicas of each live inference group: desired (its count, the autoscaler's "
                                     "when it has one) and ready", labels=["group", "kind"])
        # Ready as `scheduling.groups.replicas.replica_ready` says: running, and ready by its probe if it has one.
        ready = Count("members", filter=Q(members__status=TaskStatus.RUNNING)
                      & (Q(readiness__isnull=True) | Q(members__ready=True)))
        for group in (TaskGroup.objects.filter(type="inference", stopped_at__isnull=True)
                      .annotate(ready_count=ready).order_by("id")):
            replicas.add_metric([group.name, "desired"], group.replicas or 0)
            replicas.add_metric([group.name, "ready"], group.ready_count if group.nodes_per_replica == 1
                                else _ready_multi_node_replicas(group))
        yield replicas

    def _nodes(self):
        nodes = GaugeMetricFamily("heteroflow_nodes", "Nodes by status", labels=["status"])
        for row in Node.objects.values("status").annotate(n=Count("id")).order_by("status"):
            nodes.add_metric([row["status"]], row["n"])
        yield nodes

        total = GaugeMetricFamily("heteroflow_gpus_total", "Cards per GPU architecture", labels=["gpu_type"])
        used = GaugeMetricFamily("heteroflow_gpus_used",
                                 "Cards held by active tasks on reachable nodes (scheduler ledger)", labels=["gpu_type"])
        # The dashboard's figures: one reader, so Prometheus and the page cannot disagree.
        for row in capacity_by_architecture():
            total.add_metric([row["architecture"]], row["total"])
            used.add_metric([row["architecture"]], row["used"])
        yield total
        yield used

        health = GaugeMetricFamily("heteroflow_gpu_health",
                                   "Cards per GPU type and health state (quarantined, else the reported health)",
                                   labels=["gpu_type", "state"])
        for (gpu_type, state), count in sorted(card_health_counts().items()):
            health.add_metric([gpu_type, state], count)
        yield health

        now = timezone.now()
        age = GaugeMetricFamily("heteroflow_node_heartbeat_age_seconds",
                                "Seconds since each node's last heartbeat", labels=["node", "status"])
        for name, status, last in Node.objects.exclude(last_heartbeat_at=None).values_list(
                "name", "status", "last_heartbeat_at"):
            age.add_metric([name, status], (now - last).total_seconds())
        yield age

    def _tasks(self):
        tasks = GaugeMetricFamily("heteroflow_tasks", "Tasks by status", labels=["status"])
        for row in Task.objects.values("status").annotate(n=Count("id")).order_by("status"):
            tasks.add_metric([row["status"]], row["n"])
        yield tasks

        pending = GaugeMetricFamily("heteroflow_pending_tasks", "Pending tasks by tenant and priority band",
                                    labels=["tenant", "priority_band"])
        rows = (Task.objects.filter(status=TaskStatus.PENDING)
                .annotate(band=priority_band()).values("tenant__name", "band").annotate(n=Count("id"))
                .order_by("tenant__name", "band"))
        for row in rows:
            pending.add_metric([row["tenant__name"], row["band"]], row["n"])
        yield pending

        oldest = Task.objects.filter(status=TaskStatus.PENDING).order_by("created_at").values_list(
            "created_at", flat=True).first()
        yield GaugeMetricFamily("heteroflow_oldest_pending_task_age_seconds", "Age of the oldest pending task",
                                value=(timezone.now() - oldest).total_seconds() if oldest else 0)

        reserved = GaugeMetricFamily("heteroflow_reserved_jobs",
                                     "Pending jobs holding nodes as their GPU type's reserved job (design §16.3)",
                                     labels=["gpu_type"])
        # A reserved gang is one job, whatever its members.
        jobs = Count("id", filter=Q(group__isnull=True)) + Count("group_id", distinct=True)
        for gpu_type, count in (Task.objects.filter(status=TaskStatus.PENDING, reserved_at__isnull=False)
                                .values_list("gpu_type").annotate(n=jobs).order_by("gpu_type")):
            reserved.add_metric([gpu_type or "any"], count)
        yield reserved

        parked = Task.objects.filter(status=TaskStatus.PENDING).filter(
            Q(attempt__isnull=False) & ~Q(attempt__code__in=PLACED_CODES)).count()
        yield GaugeMetricFamily("heteroflow_parked_tasks",
                                "Pending tasks whose latest attempt could not place them", value=parked)

    def _sharing(self):
        """design §16.2: cards each tenant holds per GPU type, within its nominal quota (own) or borrowed from its
        cohort, and its nominal quotas; from the quota book the scheduler admits by."""
        book = load_quota_book()
        names = dict(Tenant.objects.values_list("id", "name"))
        used = GaugeMetricFamily("heteroflow_tenant_gpu_used",
                                 "Cards a tenant's active tasks hold per GPU type, fractional tasks as their share: "
                                 "own (within nominal or without quotas) or borrowed from its cohort",
                                 labels=["tenant", "gpu_type", "kind"])
        for (tenant_id, gpu_type), held in sorted(book.used.items()):
            borrowed = book.borrowed_used.get((tenant_id, gpu_type), 0)
            used.add_metric([names.get(tenant_id, str(tenant_id)), gpu_type, "own"], (held - borrowed) / CARD)
            used.add_metric([names.get(tenant_id, str(tenant_id)), gpu_type, "borrowed"], borrowed / CARD)
        yield used
        nominal = GaugeMetricFamily("heteroflow_tenant_gpu_nominal",
                                    "A tenant's nominal (guaranteed) quota per GPU type, in cards",
                                    labels=["tenant", "gpu_type"])
        for tenant_id, rows in sorted(book.nominal.items()):
            for gpu_type, row in sorted(rows.items()):
                nominal.add_metric([names.get(tenant_id, str(tenant_id)), gpu_type], row.nominal / CARD)
        yield nominal

    def _attempts(self):
        attempts = CounterMetricFamily("heteroflow_scheduling_attempts", "Scheduling attempts by code",
                                       labels=["code"])
        conflicts = 0
        for code, count in AttemptCodeCount.objects.values_list("code", "count").order_by("code"):
            attempts.add_metric([code], count)
            conflicts += count if code == reasons.BIND_CONFLICT else 0
        yield attempts
        yield CounterMetricFamily("heteroflow_cas_conflicts",
                                  "Binds whose compare-and-swap lost to another scheduler instance", value=conflicts)

        last = CycleRecord.objects.order_by("-started_at", "-id").first()
        cycle = GaugeMetricFamily("heteroflow_last_cycle", "Figures of the latest scheduling cycle", labels=["figure"])
        if last is not None:
            for figure in ("considered", "bound", "failed", "preempting", "duration_ms"):
                cycle.add_metric([figure], getattr(last, figure))
        yield cycle

    def _events(self):
        try:
            pipe = _redis().pipeline(transaction=False)
            for key in (CYCLE_DURATION.key, QUEUE_LATENCY.key, TIME_TO_START.key, _counters_key()):
                pipe.hgetall(key)
            durations, latencies, starts, counters = pipe.execute()
        except Exception:
            logger.warning("event metrics unavailable: Redis did not answer", exc_info=True)
            return
        yield CYCLE_DURATION.family(durations)
        yield QUEUE_LATENCY.family(latencies)
        yield TIME_TO_START.family(starts)
        yield CounterMetricFamily("heteroflow_binds", "Tasks bound to a node by the scheduler",
                                  value=int(counters.get(b"binds", 0)))
        corrections = CounterMetricFamily("heteroflow_ledger_corrections",
                                          "Stored ledgers found wrong by a recount and corrected", labels=["ledger"])
        for field, value in sorted(counters.items()):
            name = field.decode()
            if name.startswith("ledger_corrections:"):
                corrections.add_metric([name.removeprefix("ledger_corrections:")], int(value))
        yield corrections
