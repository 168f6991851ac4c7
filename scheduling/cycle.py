"""The scheduling cycle (SPEC §4): take up to 200 pending tasks, place each one, record what happened.

Per cycle: the plugin set is read from the database (so every instance applies a change at its next cycle), the
cluster snapshot is built once, and each task goes admission → framework → bind; a successful bind updates the
in-memory snapshot so the next task of the cycle sees it. Binds are committed BIND_BATCH at a time
(`bind_batch`, one transaction each): a task's placement goes into the snapshot as soon as it is decided, and a
placement the live re-check refuses is taken back (its node re-read) and the task tries again on its own path.
Several instances may run cycles at once: they take disjoint windows of the queue through the shared scan cursor,
and the bind's compare-and-swap settles any overlap.
"""

import gc
import logging
import random
import time
from dataclasses import dataclass, replace

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from scheduling.selectors import current_plugin_set
from scheduling import immediate_queue, lifecycle, preemption, quotas
from scheduling.bind import Placement, bind_batch, bind_task
from scheduling.diagnostics import AttemptBatch, attempt_nodes
from scheduling.framework import reasons
from scheduling.framework.framework import Framework, ScheduleResult, apply_bind
from scheduling.framework.registry import PluginSetting, build_plugin_set
from scheduling.framework.snapshot import ClusterSnapshot, SchedulerConfig, TaskInfo
from scheduling.groups.gang_bind import gang_group_ids, schedule_pending_groups
from scheduling.models import CycleRecord, ScanCursor, Task
from scheduling.preemption.candidates import CandidatePool
from scheduling.signals import cycle_completed
from scheduling.snapshot_builder import TASK_INFO_FIELDS, build_snapshot, refresh_node, task_info_from_row

logger = logging.getLogger(__name__)

CYCLE_LIMIT = 200
CURSOR_NAME = "main"
# Freshly created tasks go first, but never take more than half a cycle: the cursor's walk to the tail of the
# queue must keep moving even while tasks are created faster than they can be placed.
IMMEDIATE_SHARE = 0.5
# Only these failures can be cured by evicting lower-priority work (SPEC §9).
PREEMPTION_TRIGGERS = frozenset({reasons.NO_SCHEDULABLE_NODES, reasons.INSUFFICIENT_RESOURCES})
# Nodes one task tries to bind to before it waits for the next cycle (the framework's choice and runners-up).
BIND_TRIES = 3
# Placements committed per bind transaction: one transaction's three round trips instead of three per task.
BIND_BATCH = 200
_QUEUE_ORDER = ("-priority", "created_at", "id")


@dataclass(frozen=True)
class CycleResult:
    considered: int
    bound: int
    failed: int
    preempting: int
    duration_ms: float
    cycle_id: int | None = None

    def as_dict(self) -> dict:
        return {"considered": self.considered, "bound": self.bound, "failed": self.failed,
                "preempting": self.preempting, "duration_ms": self.duration_ms}


def run_cycle(*, instance: str = "main", rng: random.Random | None = None, limit: int = CYCLE_LIMIT,
              plugin_settings: list[PluginSetting] | None = None) -> CycleResult:
    """Run one cycle. `plugin_settings` overrides the stored plugin configuration (tests, benchmarks)."""
    started_at = timezone.now()
    clock = time.perf_counter()
    rng = rng or random.Random()
    tasks = take_pending_tasks(limit)
    bound = failed = preempting = 0
    if tasks:
        plugin_set = build_plugin_set(plugin_settings) if plugin_settings is not None else current_plugin_set()
        config = SchedulerConfig.from_settings()
        framework = Framework(plugin_set, config)
        snapshot = build_snapshot()
        # The snapshot lives for the whole cycle and each attempt allocates thousands of objects: without this,
        # full collections walking the snapshot cost more than scheduling itself on a large cluster.
        gc.freeze()
        try:
            usage = quotas.QuotaUsage.load()
            attempts = AttemptBatch()
            pool = CandidatePool()
            overloaded: set[int] = set()
            # Gangs bind all-or-nothing on their own path (SPEC §10); their members never go through bind_task
            # alone.
            gangs = gang_group_ids({task.group_id for task in tasks if task.group_id})
            for gang in schedule_pending_groups(snapshot, framework, rng, usage=usage):
                bound += len(gang.bound_task_ids)
                failed += not gang.bound and gang.code != reasons.BIND_CONFLICT
            batch = _BindBatch(framework, snapshot, usage, attempts, rng, overloaded, pool)
            outcomes = []
            for task in tasks:
                if task.group_id in gangs:
                    continue
                outcome = batch.decide(task)
                if outcome is not None:
                    outcomes.append(outcome)
                elif len(batch) >= BIND_BATCH:
                    outcomes.extend(batch.commit())
            outcomes.extend(batch.commit())
            for outcome in outcomes:
                bound += outcome == reasons.SCHEDULED
                preempting += outcome == reasons.PREEMPTION_PENDING
                failed += outcome not in (reasons.SCHEDULED, reasons.PREEMPTION_PENDING, reasons.BIND_CONFLICT)
            attempts.flush()
        finally:
            gc.unfreeze()
    duration_ms = round((time.perf_counter() - clock) * 1000, 3)
    result = CycleResult(considered=len(tasks), bound=bound, failed=failed, preempting=preempting,
                         duration_ms=duration_ms)
    if not tasks:
        return result
    cycle_id = _record_cycle(started_at, result)
    logger.info("scheduler %s cycle %s: %s", instance, cycle_id, result.as_dict())
    return replace(result, cycle_id=cycle_id)


def check_admission(task: TaskInfo, usage: quotas.QuotaUsage):
    """The admission seam before placement: tenant GPU quotas (SPEC §1). A Status means the task waits."""
    return quotas.check_admission(task, usage)


def try_preemption(task: TaskInfo, result: ScheduleResult, snapshot: ClusterSnapshot, framework: Framework,
                   pool: CandidatePool):
    """The preemption seam (SPEC §9), after a NoSchedulableNodes / InsufficientResources attempt.

    Returns the preemption module's outcome (its `code` is the attempt code, PreemptionPending when victims are
    now being evicted) or None when preemption has nothing to offer. `pool` is the cycle's view of the active
    tasks, read on first need.
    """
    return preemption.try_preemption(task, result, snapshot, framework.plugin_set, pool=pool, framework=framework)


@dataclass
class _Decided:
    task: TaskInfo
    result: ScheduleResult
    placement: Placement


class _BindBatch:
    """The cycle's placements waiting for their bind transaction, already applied to the snapshot (and the quota
    usage) so that the tasks decided after them see them."""

    def __init__(self, framework: Framework, snapshot: ClusterSnapshot, usage: quotas.QuotaUsage,
                 attempts: AttemptBatch, rng: random.Random, overloaded: set[int], pool: CandidatePool) -> None:
        self.framework, self.snapshot, self.usage, self.attempts = framework, snapshot, usage, attempts
        self.rng, self.overloaded, self.pool = rng, overloaded, pool
        self.decided: list[_Decided] = []

    def __len__(self) -> int:
        return len(self.decided)

    def decide(self, task: TaskInfo) -> str | None:
        """Admission and the framework for `task`: None when its placement joined the batch, else the attempt
        code (the attempt is recorded)."""
        refusal = check_admission(task, self.usage)
        if refusal is not None:
            self.attempts.add(task.id, reasons.QUOTA_EXCEEDED, refusal.reason)
            return reasons.QUOTA_EXCEEDED
        result = self.framework.schedule(task, self.snapshot, self.rng)
        if result.node is None:
            return _record_unplaced(task, result, self.snapshot, self.framework, self.attempts, self.pool)
        node = next(_bind_candidates(result, self.snapshot, self.overloaded), None)
        if node is None:
            return _record_overloaded(task, result, self.attempts)
        cards = self.framework.select_cards(task, node, tenancy=self.snapshot.tenancy)
        apply_bind(self.snapshot, task, node, cards)
        self.usage.record_bind(task)
        self.decided.append(_Decided(task, result, Placement(task, node, cards)))
        return None

    def commit(self) -> list[str]:
        """Bind the batch in one transaction; the attempt codes of its tasks. A refused task gets its placement
        taken back and goes through `_place` (the runners-up) after the batch."""
        decided, self.decided = self.decided, []
        if not decided:
            return []
        outcomes = bind_batch([entry.placement for entry in decided], config=self.framework.config,
                              tenancy=self.snapshot.tenancy)
        codes, retries, stale = [], [], set()
        for entry, bind in zip(decided, outcomes):
            node = entry.placement.node
            if bind.bound:
                self.pool.record_bind(entry.task, node_id=node.id, cards=bind.cards, shard=bind.shard)
                if list(bind.cards) != sorted(entry.placement.cards):
                    stale.add(node.id)
                nodes, extra = attempt_nodes(entry.result)
                self.attempts.add(entry.task.id, reasons.SCHEDULED, entry.result.message, nodes,
                                  {**extra, "bound": bind.message})
                codes.append(reasons.SCHEDULED)
                continue
            self.usage.forget_bind(entry.task)
            stale.add(node.id)
            if bind.node_overloaded:
                self.overloaded.add(node.id)
            if bind.conflict:
                # Another instance placed the task; its attempt is the one to keep.
                self.attempts.count(reasons.BIND_CONFLICT)
                codes.append(reasons.BIND_CONFLICT)
            else:
                retries.append(entry.task)
        # Re-read after the commit: the node then holds exactly what this batch and everyone else bound there.
        for node_id in sorted(stale):
            refresh_node(self.snapshot, node_id)
        codes.extend(_place(task, self.framework, self.snapshot, self.usage, self.attempts, self.rng,
                            self.overloaded, self.pool) for task in retries)
        return codes


def _record_unplaced(task: TaskInfo, result: ScheduleResult, snapshot: ClusterSnapshot, framework: Framework,
                     attempts: AttemptBatch, pool: CandidatePool) -> str:
    """No feasible node: preemption when it can help, and the attempt either way; returns the attempt code."""
    outcome = try_preemption(task, result, snapshot, framework, pool) \
        if result.code in PREEMPTION_TRIGGERS else None
    nodes, extra = attempt_nodes(result)
    if outcome is not None:
        attempts.add(task.id, outcome.code, outcome.message, nodes, {**extra, **outcome.diagnostics})
        return outcome.code
    attempts.add(task.id, result.code, result.message, nodes, extra)
    return result.code


def _record_overloaded(task: TaskInfo, result: ScheduleResult, attempts: AttemptBatch) -> str:
    nodes, extra = attempt_nodes(result)
    code = reasons.LOAD_THRESHOLD_EXCEEDED
    attempts.add(task.id, code, f"{result.message} Every feasible node is over a load threshold.", nodes, extra)
    return code


def _place(task: TaskInfo, framework: Framework, snapshot: ClusterSnapshot, usage: quotas.QuotaUsage,
           attempts: AttemptBatch, rng: random.Random, overloaded: set[int], pool: CandidatePool) -> str:
    """One task through admission, the framework and bind; returns the attempt code."""
    refusal = check_admission(task, usage)
    if refusal is not None:
        attempts.add(task.id, reasons.QUOTA_EXCEEDED, refusal.reason)
        return reasons.QUOTA_EXCEEDED
    result = framework.schedule(task, snapshot, rng)
    if result.node is None:
        return _record_unplaced(task, result, snapshot, framework, attempts, pool)
    refusals = []
    for node in _bind_candidates(result, snapshot, overloaded):
        cards = framework.select_cards(task, node, tenancy=snapshot.tenancy)
        bind = bind_task(task, node, cards, config=framework.config, tenancy=snapshot.tenancy)
        if bind.conflict:
            # Another instance placed the task; its attempt is the one to keep.
            attempts.count(reasons.BIND_CONFLICT)
            return reasons.BIND_CONFLICT
        if bind.bound:
            apply_bind(snapshot, task, node, list(bind.cards))
            usage.record_bind(task)
            pool.record_bind(task, node_id=node.id, cards=bind.cards, shard=bind.shard)
            nodes, extra = attempt_nodes(result)
            attempts.add(task.id, reasons.SCHEDULED, result.message, nodes, {**extra, "bound": bind.message})
            return reasons.SCHEDULED
        refusals.append(bind)
        if bind.node_overloaded:
            overloaded.add(node.id)
        else:
            # Live data disagreed with the snapshot: refresh the node so later tasks of the cycle judge it right.
            refresh_node(snapshot, node.id)
    if not refusals:
        return _record_overloaded(task, result, attempts)
    nodes, extra = attempt_nodes(result)
    last = refusals[-1]
    attempts.add(task.id, last.code,
                 f"{result.message} Bind refused: " + "; ".join(refusal.message for refusal in refusals), nodes, extra)
    return last.code


def _bind_candidates(result: ScheduleResult, snapshot: ClusterSnapshot, overloaded: set[int]):
    """The framework's choice, then the next best feasible nodes, skipping nodes found over a load threshold
    this cycle (the filters leave CPU and memory load to bind, SPEC §6), at most BIND_TRIES of them."""
    tries = 0
    if result.node.id not in overloaded:
        tries += 1
        yield result.node
    if tries == BIND_TRIES:
        return
    for node_id, _total in sorted(result.totals.items(), key=lambda item: -item[1]):
        if node_id == result.node.id or node_id in overloaded:
            continue
        tries += 1
        yield snapshot.node(node_id)
        if tries == BIND_TRIES:
            return


def take_pending_tasks(limit: int = CYCLE_LIMIT) -> list[TaskInfo]:
    """Immediate-queue tasks first, then the next window of the queue from the scan cursor (wrapping to the head),
    the window in queue order: priority descending, then creation time, then id."""
    immediate = _immediate_tasks(int(limit * IMMEDIATE_SHARE))
    window = _advance_cursor(limit - len(immediate), exclude={task.id for task in immediate})
    return immediate + window


def _immediate_tasks(limit: int) -> list[TaskInfo]:
    if limit <= 0:
        return []
    try:
        queued = immediate_queue.drain(limit)
    except Exception:  # the queue only shortens the wait; the cursor finds these tasks anyway
        logger.warning("immediate queue unavailable", exc_info=True)
        return []
    if not queued:
        return []
    rows = Task.objects.filter(id__in=queued, status=lifecycle.PENDING).values_list(*TASK_INFO_FIELDS)
    by_id = {row[0]: task_info_from_row(row) for row in rows}
    return [by_id.pop(task_id) for task_id in queued if task_id in by_id]


def _advance_cursor(limit: int, *, exclude: set[int]) -> list[TaskInfo]:
    """The `limit` pending tasks after the shared cursor, wrapping to the head; moves the cursor past them.

    The cursor row is locked while the window is chosen, so concurrent instances take consecutive windows.
    """
    if limit <= 0:
        return []
    pending = Task.objects.filter(status=lifecycle.PENDING).exclude(id__in=exclude).order_by(*_QUEUE_ORDER)
    with transaction.atomic():
        cursor = _locked_cursor()
        after = _after_cursor(cursor)
        rows = list(pending.filter(after).values_list(*TASK_INFO_FIELDS)[:limit]) if after else []
        wrapped = []
        if len(rows) < limit:
            taken = [row[0] for row in rows]
            wrapped = list(pending.exclude(id__in=taken).values_list(*TASK_INFO_FIELDS)[: limit - len(rows)])
        # Everything pending fitted in this window: the next one starts again from the head.
        exhausted = len(rows) + len(wrapped) < limit
        _move_cursor(cursor, None if exhausted else (wrapped or rows)[-1])
    tasks = [task_info_from_row(row) for row in rows + wrapped]
    tasks.sort(key=lambda task: (-task.priority, task.created_at, task.id))
    return tasks


def _locked_cursor() -> ScanCursor:
    cursor = ScanCursor.objects.select_for_update().filter(name=CURSOR_NAME).first()
    if cursor is None:
        ScanCursor.objects.bulk_create([ScanCursor(name=CURSOR_NAME)], ignore_conflicts=True)
        cursor = ScanCursor.objects.select_for_update().get(name=CURSOR_NAME)
    return cursor


def _after_cursor(cursor: ScanCursor) -> Q | None:
    """Tasks strictly after the cursor in queue order; None when the cursor is at the head."""
    if cursor.task_id is None:
        return None
    priority, created_at, task_id = cursor.priority, cursor.created_at, cursor.task_id
    return (
        Q(priority__lt=priority)
        | Q(priority=priority, created_at__gt=created_at)
        | Q(priority=priority, created_at=created_at, id__gt=task_id)
    )


def _move_cursor(cursor: ScanCursor, last_row: tuple | None) -> None:
    if last_row is None:
        priority = created_at = task_id = None
    else:
        fields = dict(zip(TASK_INFO_FIELDS, last_row))
        priority, created_at, task_id = fields["priority"], fields["created_at"], fields["id"]
    if (cursor.priority, cursor.created_at, cursor.task_id) == (priority, created_at, task_id):
        return
    ScanCursor.objects.filter(id=cursor.id).update(priority=priority, created_at=created_at, task_id=task_id)


def _record_cycle(started_at, result: CycleResult) -> int:
    with transaction.atomic():
        record = CycleRecord.objects.create(
            started_at=started_at, considered=result.considered, bound=result.bound, failed=result.failed,
            preempting=result.preempting, duration_ms=result.duration_ms,
        )
        figures = result.as_dict()
        transaction.on_commit(lambda: cycle_completed.send(sender=CycleRecord, cycle_id=record.id, **figures))
    return record.id
