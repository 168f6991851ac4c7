"""The scheduling cycle (SPEC §4): take up to 200 pending tasks, place each one, record what happened.

Per cycle: the plugin set is read from the database (so every instance applies a change at its next cycle), the
cluster snapshot (nodes, share groups, tenant quotas) is built once, waiting gangs are planned and bound whole,
then every other task goes through the framework's extension points (`Framework`, which runs each of them):
PreFilter → Filter → PostFilter when nothing fits (preemption) → Score → Reserve → Permit. A placement is applied
to the snapshot at once, so the next task sees it, and joins the batch that Bind commits BIND_BATCH at a time
(the bind pipeline, `scheduling.bind`, one transaction per batch). A placement the live re-check refuses is taken
back (its node re-read) and its task goes back to the framework, which decides again over the refreshed node.
Several instances may run cycles at once: they take disjoint windows of the queue through the shared scan cursor,
and the bind's compare-and-swap settles any overlap.
"""

import gc
import logging
import random
import time
from collections import deque
from dataclasses import dataclass, field, replace

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from scheduling import immediate_queue, lifecycle
from scheduling.bind import BindOutcome, Placement, bind_batch
from scheduling.diagnostics import AttemptBatch, attempt_nodes
from scheduling.framework import reasons
from scheduling.framework.framework import Framework, ScheduleResult, apply_bind
from scheduling.framework.registry import PluginSetting
from scheduling.framework.snapshot import ClusterSnapshot, SchedulerConfig, TaskInfo
from scheduling.framework.status import Code, Status
from scheduling.groups.gang_bind import gang_group_ids, schedule_pending_groups
from scheduling.models import CycleRecord, ScanCursor, Task
from scheduling.plugins import build_plugin_set
from scheduling.preemption.attempt import PreemptionHandle
from scheduling.preemption.candidates import CandidatePool
from scheduling.quotas import load_tenant_quotas
from scheduling.selectors import current_plugin_set
from scheduling.signals import cycle_completed
from scheduling.snapshot_builder import TASK_INFO_FIELDS, refresh_nodes, task_info_from_row
from scheduling.cycle_turns import cycle_turn
from scheduling.snapshot_cache import snapshot_cache

logger = logging.getLogger(__name__)

CYCLE_LIMIT = 200
CURSOR_NAME = "main"
# Freshly created tasks go first, but never take more than half a cycle: the cursor's walk to the tail of the
# queue must keep moving even while tasks are created faster than they can be placed.
IMMEDIATE_SHARE = 0.5
# Binds one task may have refused in a cycle before it waits for the next one (the first choice, then runners-up).
BIND_TRIES = 4
# Placements committed per bind transaction: one transaction's three round trips instead of three per task.
BIND_BATCH = 200
# How long a cycle waits for another instance's cycle to end before it skips (the next tick comes soon).
TURN_WAIT_SECONDS = 5.0
_QUEUE_ORDER = ("-priority", "created_at", "id")


@dataclass(frozen=True)
class CycleResult:
    considered: int
    bound: int
    failed: int
    preempting: int
    duration_ms: float
    cycle_id: int | None = None
    skipped: bool = False

    def as_dict(self) -> dict:
        return {"considered": self.considered, "bound": self.bound, "failed": self.failed,
                "preempting": self.preempting, "duration_ms": self.duration_ms}


def run_cycle(*, instance: str = "main", rng: random.Random | None = None, limit: int = CYCLE_LIMIT,
              plugin_settings: list[PluginSetting] | None = None) -> CycleResult:
    """Run one cycle, in turn with the other scheduler instances (`scheduling.cycle_turns`); an empty result
    with `skipped` when another instance kept its turn too long. `plugin_settings` overrides the stored plugin
    configuration (tests, benchmarks)."""
    with cycle_turn(wait=TURN_WAIT_SECONDS) as turn:
        if not turn:
            return CycleResult(considered=0, bound=0, failed=0, preempting=0, duration_ms=0.0, skipped=True)
        return _run_cycle(instance=instance, rng=rng, limit=limit, plugin_settings=plugin_settings)


def _run_cycle(*, instance: str, rng: random.Random | None, limit: int,
               plugin_settings: list[PluginSetting] | None) -> CycleResult:
    started_at = timezone.now()
    clock = time.perf_counter()
    rng = rng or random.Random()
    tasks = take_pending_tasks(limit)
    bound = failed = preempting = 0
    if tasks:
        plugin_set = build_plugin_set(plugin_settings) if plugin_settings is not None else current_plugin_set()
        framework = Framework(plugin_set, SchedulerConfig.from_settings())
        with snapshot_cache.snapshot(framework.config) as snapshot:
            snapshot.quotas = load_tenant_quotas()
            # The snapshot lives for the whole cycle and each attempt allocates thousands of objects: without this,
            # full collections walking the snapshot cost more than scheduling itself on a large cluster.
            gc.freeze()
            try:
                attempts = AttemptBatch()
                # Gangs bind all-or-nothing on their own (SPEC §10); their members are never placed alone.
                gangs = gang_group_ids({task.group_id for task in tasks if task.group_id})
                for gang in schedule_pending_groups(snapshot, framework, rng):
                    bound += len(gang.bound_task_ids)
                    failed += not gang.bound and gang.code != reasons.BIND_CONFLICT
                placer = _Placer(framework, snapshot, attempts, rng)
                for outcome in placer.place([task for task in tasks if task.group_id not in gangs]):
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


@dataclass
class _Try:
    """A task on its way through the cycle, with the binds refused for it so far."""

    task: TaskInfo
    refused: list[BindOutcome] = field(default_factory=list)
    refused_on: set[int] = field(default_factory=set)


@dataclass
class _Decided:
    attempt: _Try
    result: ScheduleResult
    placement: Placement


class _Placer:
    """Takes each task through the framework and commits the placements in batches (module docstring)."""

    def __init__(self, framework: Framework, snapshot: ClusterSnapshot, attempts: AttemptBatch,
                 rng: random.Random) -> None:
        self.framework, self.snapshot, self.attempts, self.rng = framework, snapshot, attempts, rng
        self.pool = CandidatePool()
        self.preemption = PreemptionHandle(framework, self.pool)
        # Nodes a bind found over a CPU or memory threshold: skipped for the rest of the cycle (the filters leave
        # node load to bind, SPEC §6).
        self.overloaded: set[int] = set()

    def place(self, tasks: list[TaskInfo]) -> list[str]:
        """Every task's attempt code, in the order the attempts ended."""
        codes: list[str] = []
        queue = deque(_Try(task) for task in tasks)
        while queue:
            batch: list[_Decided] = []
            while queue and len(batch) < BIND_BATCH:
                decided = self._decide(queue.popleft())
                if isinstance(decided, str):
                    codes.append(decided)
                else:
                    batch.append(decided)
            # Refused placements go back to the framework first, before the rest of the queue.
            queue.extendleft(reversed(self._commit(batch, codes)))
        return codes

    def _decide(self, attempt: _Try) -> _Decided | str:
        """The framework's placement for the task (applied to the snapshot), or the code its attempt ended with
        (the attempt is recorded)."""
        task = attempt.task
        result = self.framework.schedule(task, self.snapshot, self.rng)
        if result.pre_filtered:
            self.attempts.add(task.id, result.code, result.message)
            return result.code
        if result.node is None:
            return self._unplaced(task, result)
        node = None
        if len(attempt.refused) < BIND_TRIES:
            node = next(_bind_candidates(result, self.snapshot, self.overloaded | attempt.refused_on), None)
        if node is None:
            return self._not_bound(attempt, result)
        cards = self.framework.reserve(task, node, self.snapshot.tenancy)
        permit = self.framework.permit([(task, node, cards)], tenancy=self.snapshot.tenancy)
        if not permit.is_success:
            nodes, extra = attempt_nodes(result)
            code = permit.attempt_code or reasons.NO_SCHEDULABLE_NODES
            self.attempts.add(task.id, code, f"{result.message} Not permitted: {permit.reason}", nodes, extra)
            return code
        apply_bind(self.snapshot, task, node, cards)
        return _Decided(attempt, result, Placement(task, node, cards))

    def _commit(self, batch: list[_Decided], codes: list[str]) -> list[_Try]:
        """Bind the batch (Bind plugins, then the pipeline); the refused attempts to decide again."""
        if not batch:
            return []
        config, tenancy = self.framework.config, self.snapshot.tenancy
        outcomes = self.framework.bind(
            [entry.placement for entry in batch], tenancy=tenancy, plugin_outcome=_plugin_bind_outcome,
            default_binder=lambda placements: bind_batch(placements, config=config, tenancy=tenancy,
                                                         reserve=self.framework.reserve),
        )
        retries, stale = [], set()
        for entry, bind in zip(batch, outcomes):
            task, node = entry.placement.task, entry.placement.node
            if bind.bound:
                self.pool.record_bind(task, node_id=node.id, cards=bind.cards, shard=bind.shard)
                if list(bind.cards) != sorted(entry.placement.cards):
                    stale.add(node.id)
                nodes, extra = attempt_nodes(entry.result)
                self.attempts.add(task.id, reasons.SCHEDULED, entry.result.message, nodes,
                                  {**extra, "bound": bind.message})
                codes.append(reasons.SCHEDULED)
                continue
            self.snapshot.quotas.forget_bind(task)
            stale.add(node.id)
            if bind.node_overloaded:
                self.overloaded.add(node.id)
            if bind.conflict:
                # Another instance placed the task; its attempt is the one to keep.
                self.attempts.count(reasons.BIND_CONFLICT)
                codes.append(reasons.BIND_CONFLICT)
            else:
                entry.attempt.refused.append(bind)
                entry.attempt.refused_on.add(node.id)
                retries.append(entry.attempt)
        # Re-read after the commit: the node then holds exactly what this batch and everyone else bound there.
        refresh_nodes(self.snapshot, stale)
        return retries

    def _unplaced(self, task: TaskInfo, result: ScheduleResult) -> str:
        """No feasible node: PostFilter (preemption) when it can help, and the attempt either way."""
        outcome = self.framework.post_filter(task, result, self.snapshot, handle=self.preemption)
        nodes, extra = attempt_nodes(result)
        if outcome is not None:
            self.attempts.add(task.id, outcome.code, outcome.message, nodes, {**extra, **outcome.diagnostics})
            return outcome.code
        self.attempts.add(task.id, result.code, result.message, nodes, extra)
        return result.code

    def _not_bound(self, attempt: _Try, result: ScheduleResult) -> str:
        """Feasible nodes, none left to bind to: the binds refused, or every candidate over a load threshold."""
        nodes, extra = attempt_nodes(result)
        if attempt.refused:
            last = attempt.refused[-1]
            message = f"{result.message} Bind refused: " + "; ".join(bind.message for bind in attempt.refused)
            self.attempts.add(attempt.task.id, last.code, message, nodes, extra)
            return last.code
        code = reasons.LOAD_THRESHOLD_EXCEEDED
        self.attempts.add(attempt.task.id, code, f"{result.message} Every feasible node is over a load threshold.",
                          nodes, extra)
        return code


def _plugin_bind_outcome(placement: Placement, status: Status) -> BindOutcome:
    """What a Bind plugin's own answer means for the cycle: bound by the plugin, or refused with its reason."""
    if status.code == Code.SUCCESS:
        return BindOutcome(code=reasons.SCHEDULED, message=f"bound to {placement.node.name} by {status.plugin}",
                           cards=tuple(placement.cards))
    return BindOutcome(code=status.attempt_code or reasons.NO_SCHEDULABLE_NODES,
                       message=f"{status.plugin}: {status.reason}")


def _bind_candidates(result: ScheduleResult, snapshot: ClusterSnapshot, skipped: set[int]):
    """The framework's choice, then the next best feasible nodes, leaving out `skipped` (nodes over a load
    threshold, nodes that already refused this task)."""
    if result.node.id not in skipped:
        yield result.node
    for node_id, _total in sorted(result.totals.items(), key=lambda item: -item[1]):
        if node_id != result.node.id and node_id not in skipped:
            yield snapshot.node(node_id)


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
