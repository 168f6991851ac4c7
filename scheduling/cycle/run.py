"""The scheduling cycle (design §4, §15.1): take the first 200 active queue entries, place each one, record what
happened, park what failed.

Per cycle: the plugin set is read from the database (so every instance applies a change at its next cycle), the
cluster snapshot (nodes, share groups, tenant quotas and status, nominations) is built once, then the entries are
placed in queue order (`scheduling.queue`): a gang (a training group, or one multi-node replica of a service) is
planned and bound whole, every other task goes through the framework's extension points (`Framework`, which runs
each of them):
PreFilter → Filter → PostFilter when nothing fits (preemption) → Score → Reserve → Permit. A placement is applied
to the snapshot at once, so the next task sees it, and joins the batch that Bind commits BIND_BATCH at a time
(the bind pipeline, `scheduling.bind`, one transaction per batch). A placement the live re-check refuses is taken
back (its node re-read) and its task goes back to the framework, which decides again over the refreshed node.
An unexpected error while placing one task is that task's attempt (`InternalError`, logged with its traceback) and
the cycle goes on. Several instances may run cycles at once: the queue's park state is shared in PostgreSQL, and
the bind's compare-and-swap settles any overlap.
"""

import logging
import random
import time
from collections import deque
from dataclasses import dataclass, field, replace
from functools import partial

from django.db import transaction
from django.utils import timezone

from scheduling import lifecycle, metrics
from scheduling.bind import BindOutcome, Placement, bind_placements
from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, prepare_admission, refresh_nodes, task_info_from_row
from scheduling.cache.snapshot_cache import snapshot_cache
from scheduling.cycle.collector import collector_paused
from scheduling.cycle.turns import TurnLost, cycle_turn
from scheduling.diagnostics.attempts import AttemptBatch, attempt_nodes
from scheduling.framework import reasons
from scheduling.framework.framework import Framework
from scheduling.framework.never_fits import never_fits
from scheduling.framework.occupancy import Occupant
from scheduling.framework.registry import PluginSetting
from scheduling.framework.result import ScheduleResult
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo
from scheduling.groups.gang_bind import GangKey, GangResult, schedule_groups
from scheduling.models import CycleRecord, Task
from scheduling.plugins import build_plugin_set
from scheduling.plugins.queue_sort import FAIR_SHARE, WEIGHTED
from scheduling.preemption.attempt import PreemptionHandle
from scheduling.preemption.candidates import CandidatePool
from scheduling.queue import immediate_queue, nomination, reservation
from scheduling.queue.entries import GANG, QueueEntry, take_active
from scheduling.queue.fair_share_order import fair_share_order, pending_tenant_shares
from scheduling.queue.positions import PublicationPace, compute_queue_positions, publish_queue_positions
from scheduling.queue.services import activation_mark, queue_park
from scheduling.queue.weighted import weighted_order
from scheduling.selectors import current_plugin_set
from scheduling.signals import cycle_completed

logger = logging.getLogger(__name__)

CYCLE_LIMIT = 200
# Binds one task may have refused in a cycle before it waits for the next one (the first choice, then runners-up).
BIND_TRIES = 4
# Placements committed per bind transaction: one transaction's three round trips instead of three per task.
BIND_BATCH = 200
# How long a cycle waits for another instance's cycle to end before it skips (the next tick comes soon).
TURN_WAIT_SECONDS = 5.0
# Attempts that end with these leave the task where it is; any other parks it (design §15.1).
_NOT_PARKED = frozenset({reasons.SCHEDULED, reasons.BIND_CONFLICT})
# The process's pace of queue-position publications.
_positions_pace = PublicationPace()


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
              plugin_settings: list[PluginSetting] | None = None, attempts_behind: bool = False) -> CycleResult:
    """Run one cycle, in turn with the other scheduler instances (`scheduling.cycle.turns`); an empty result
    with `skipped` when another instance kept its turn too long, or when this one lost its turn with its database
    session in the middle of the cycle. `plugin_settings` overrides the stored plugin
    configuration (tests, benchmarks). `attempts_behind`: the cycle's attempts are written while the caller goes on
    (a scheduler running cycles back to back, `AttemptBatch.flush`); otherwise they are stored when it returns."""
    skipped = CycleResult(considered=0, bound=0, failed=0, preempting=0, duration_ms=0.0, skipped=True)
    try:
        with cycle_turn(wait=TURN_WAIT_SECONDS) as turn:
            if not turn:
                return skipped
            return _run_cycle(instance=instance, rng=rng, limit=limit, plugin_settings=plugin_settings,
                              attempts_behind=attempts_behind)
    except TurnLost:
        # What it committed before stands; what it had not is decided again by whoever has the turn now.
        logger.warning("scheduler %s lost its turn in the middle of its cycle: its database session ended",
                       instance)
        return skipped


def _run_cycle(*, instance: str, rng: random.Random | None, limit: int,
               plugin_settings: list[PluginSetting] | None, attempts_behind: bool) -> CycleResult:
    started_at = timezone.now()
    clock = time.perf_counter()
    rng = rng or random.Random()
    entries = take_pending_entries(limit)
    considered = bound = failed = preempting = 0
    bound_tasks: list[TaskInfo] = []
    if entries:
        mark = activation_mark()
        plugin_set = build_plugin_set(plugin_settings) if plugin_settings is not None else current_plugin_set()
        framework = Framework(plugin_set, SchedulerConfig.from_settings())
        with collector_paused(), snapshot_cache.snapshot(framework.config) as snapshot:
            prepare_admission(snapshot)
            # The window comes in priority-then-creation order, the default (design §17.1).
            shares = pending_tenant_shares() if plugin_set.queue_order == FAIR_SHARE else None
            if shares is not None:
                entries = fair_share_order(entries, shares)
            elif plugin_set.queue_order == WEIGHTED:
                entries = weighted_order(entries, snapshot)
            reserved = frozenset(reservation.reserve_waiting_jobs(snapshot, framework).values())
            held = nomination.hold_nominated_cards(snapshot)
            attempts = AttemptBatch()
            placer = _Placer(framework, snapshot, attempts, rng, held, reserved)
            unplaced_tasks, unplaced_gangs = [], []
            for kind, run in _runs(entries):
                if kind == GANG:
                    for gang in _schedule_gangs(run, snapshot, framework, rng, attempts, held):
                        considered += 1
                        bound += len(gang.bound_tasks)
                        bound_tasks.extend(gang.bound_tasks)
                        failed += not gang.bound and gang.code != reasons.BIND_CONFLICT
                        if gang.code in _NOT_PARKED:
                            continue
                        if gang.replica is None:
                            unplaced_gangs.append(gang.group_id)
                        else:
                            # One replica of a service waits, not the others (design §17.1).
                            unplaced_tasks.extend(gang.pending)
                    continue
                tasks = _task_infos([entry.id for entry in run])
                considered += len(tasks)
                by_id = {task.id: task for task in tasks}
                for task_id, outcome in placer.place(tasks).items():
                    if outcome == reasons.SCHEDULED:
                        bound += 1
                        bound_tasks.append(by_id[task_id])
                    preempting += outcome in reasons.VICTIMS_STOPPING
                    failed += outcome not in (reasons.SCHEDULED, *reasons.VICTIMS_STOPPING,
                                              reasons.BIND_CONFLICT)
                    if outcome not in _NOT_PARKED:
                        unplaced_tasks.append(task_id)
            attempts.flush(behind=attempts_behind)
            nomination.settle(placer.outcomes)
            queue_park(task_ids=unplaced_tasks, group_ids=unplaced_gangs, mark=mark)
            _publish_positions(plugin_set.queue_order, snapshot, shares)
    duration_ms = round((time.perf_counter() - clock) * 1000, 3)
    result = CycleResult(considered=considered, bound=bound, failed=failed, preempting=preempting,
                         duration_ms=duration_ms)
    if not entries:
        metrics.record_cycle(duration_seconds=None)
        return result
    cycle_id = _record_cycle(started_at, result)
    # Submission to bind, as of this cycle's end: no query on the hot path for a histogram of seconds.
    ended_at = timezone.now()
    latencies = [(ended_at - task.created_at).total_seconds() for task in bound_tasks if task.created_at]
    metrics.record_cycle(duration_seconds=duration_ms / 1000, bound=bound, queue_latencies=latencies)
    logger.info("scheduler %s cycle %s: %s", instance, cycle_id, result.as_dict(), extra={"cycle_id": cycle_id})
    return replace(result, cycle_id=cycle_id)


def _publish_positions(order: str, snapshot: ClusterSnapshot, shares: dict | None) -> None:
    """What is left pending, in the order in force, for the pages and the API (`scheduling.queue.positions`),
    when it is due."""
    if not _positions_pace.due():
        return
    started = time.perf_counter()
    try:
        positions = compute_queue_positions(order=order, snapshot=snapshot, shares=shares)
        publish_queue_positions(positions)
    except Exception:
        # Positions are a view of the queue: the placements of this cycle stand without them.
        logger.warning("queue positions not published", exc_info=True)
        return
    _positions_pace.published(tasks=len(positions), seconds=time.perf_counter() - started)


def _runs(entries: list[QueueEntry]):
    """The entries cut into runs of one kind, in queue order: a run of tasks is placed and bound as batches, a
    gang on its own, so work is bound in queue order."""
    run: list[QueueEntry] = []
    for entry in entries:
        if run and run[-1].kind != entry.kind:
            yield run[-1].kind, run
            run = []
        run.append(entry)
    if run:
        yield run[-1].kind, run


def _schedule_gangs(run: list[QueueEntry], snapshot: ClusterSnapshot, framework: Framework, rng: random.Random,
                    attempts: AttemptBatch, held: nomination.HeldCards):
    """Each gang of the run, whole or not at all; an unexpected error is that gang's attempt and the run goes on."""
    for entry in run:
        try:
            yield from schedule_groups([GangKey(entry.id, entry.replica)], snapshot, framework, rng, held)
        except Exception as error:
            logger.exception("scheduling gang %s failed unexpectedly", entry.key)
            message = _internal_error_message(error)
            members = Task.objects.filter(group_id=entry.id, status=lifecycle.PENDING)
            if entry.replica is not None:
                members = members.filter(replica=entry.replica)
            pending = tuple(members.values_list("id", flat=True))
            for task_id in pending:
                attempts.add(task_id, reasons.INTERNAL_ERROR, message)
            yield GangResult(entry.id, reasons.INTERNAL_ERROR, message, replica=entry.replica, pending=pending)


def _internal_error_message(error: Exception) -> str:
    return f"Internal error while scheduling ({type(error).__name__}); the scheduler's log has the traceback."


@dataclass
class _InFlight:
    """A task on its way through the cycle, with the binds refused for it so far."""

    task: TaskInfo
    refused: list[BindOutcome] = field(default_factory=list)
    refused_on: set[int] = field(default_factory=set)


@dataclass
class _Decided:
    """A placement waiting for its batch's commit, with the attempt it records if it binds: the stored form
    (`attempt_nodes`), not the ScheduleResult, whose per-row arrays would keep ~1 MB per task of a batch alive on
    a 20,000-node cluster."""

    in_flight: _InFlight
    message: str
    nodes: dict
    extra: dict
    placement: Placement


class _Placer:
    """Takes each task through the framework and commits the placements in batches (module docstring)."""

    def __init__(self, framework: Framework, snapshot: ClusterSnapshot, attempts: AttemptBatch,
                 rng: random.Random, held: nomination.HeldCards, reserved: frozenset[int] = frozenset()) -> None:
        self.framework, self.snapshot, self.attempts, self.rng = framework, snapshot, attempts, rng
        self.held = held
        self.pool = CandidatePool()
        self.preemption = PreemptionHandle(framework, self.pool, reserved=reserved, held=held)
        # Nodes a bind found over a CPU or memory threshold: skipped for the rest of the cycle (the filters leave
        # node load to bind, design §6).
        self.overloaded: set[int] = set()
        # Task id → the code its attempt ended with.
        self.outcomes: dict[int, str] = {}

    def place(self, tasks: list[TaskInfo]) -> dict[int, str]:
        """Every task's attempt code, by task id."""
        codes: dict[int, str] = {}
        queue = deque(_InFlight(task) for task in tasks)
        while queue:
            batch: list[_Decided] = []
            while queue and len(batch) < BIND_BATCH:
                in_flight = queue.popleft()
                decided = self._decide_isolated(in_flight)
                if isinstance(decided, str):
                    codes[in_flight.task.id] = decided
                else:
                    batch.append(decided)
            # Refused placements go back to the framework first, before the rest of the queue.
            queue.extendleft(reversed(self._commit(batch, codes)))
        self.outcomes.update(codes)
        return codes

    def _decide_isolated(self, in_flight: _InFlight) -> _Decided | str:
        """`_decide`, with an unexpected error recorded as the task's attempt instead of ending the cycle."""
        try:
            return self._decide(in_flight)
        except Exception as error:
            logger.exception("scheduling task %s failed unexpectedly", in_flight.task.id)
            self.attempts.add(in_flight.task.id, reasons.INTERNAL_ERROR, _internal_error_message(error))
            return reasons.INTERNAL_ERROR

    def _decide(self, in_flight: _InFlight) -> _Decided | str:
        """The framework's placement for the task (applied to the snapshot), or the code its attempt ended with
        (the attempt is recorded)."""
        task = in_flight.task
        # A nominee sees the cards held for it (they are held only from the others).
        self.held.release_for(task, self.snapshot)
        placing = self.framework.place(task, self.snapshot, self.rng, pick=partial(self._bind_node, in_flight))
        result = placing.result
        if result.node is None:
            try:
                impossible = never_fits(task, self.snapshot)
                if impossible is not None:
                    # Ahead of quota and the 0/N line: waiting would not help (docs/design.md §12).
                    self.attempts.add(task.id, reasons.NEVER_FITS, impossible)
                    return reasons.NEVER_FITS
                if result.pre_filtered:
                    self.attempts.add(task.id, result.code, result.message)
                    return result.code
                return self._unplaced(task, result)
            finally:
                # After PostFilter: a reserved job's preemption or defrag plan counts its node's free cards as free.
                self.held.restore_for(task, self.snapshot)
        if placing.node is None:
            return self._not_bound(in_flight, result)
        nodes, extra = attempt_nodes(result)
        if placing.refusal is not None:
            code = placing.refusal.attempt_code or reasons.NO_SCHEDULABLE_NODES
            self.attempts.add(task.id, code, f"{result.message} Not permitted: {placing.refusal.reason}", nodes,
                              extra)
            return code
        return _Decided(in_flight, result.message, nodes, extra, Placement(task, placing.node, placing.cards))

    def _bind_node(self, in_flight: _InFlight, result: ScheduleResult) -> NodeInfo | None:
        """The node to bind to: the framework's choice, or the next best feasible one when binds were refused or
        nodes found overloaded; None once the task's bind tries are spent."""
        if len(in_flight.refused) >= BIND_TRIES:
            return None
        return next(_bind_candidates(result, self.snapshot, self.overloaded | in_flight.refused_on), None)

    def _commit(self, batch: list[_Decided], codes: dict[int, str]) -> list[_InFlight]:
        """Bind the batch (Bind plugins, then the pipeline); the refused attempts to decide again."""
        if not batch:
            return []
        try:
            outcomes = self._bind([entry.placement for entry in batch])
        except Exception:
            # One bad placement must not cost the batch: bind them one by one, an error is that task's attempt.
            logger.exception("binding a batch of %s failed unexpectedly; binding one by one", len(batch))
            outcomes = [self._bind_alone(entry.placement) for entry in batch]
        retries, stale = [], set()
        for entry, bind in zip(batch, outcomes):
            task, node = entry.placement.task, entry.placement.node
            if bind.bound:
                self.pool.record_bind(task, node_id=node.id, cards=bind.cards, shard=bind.shard,
                                      card_type=bind.card_type)
                if list(bind.cards) != sorted(entry.placement.cards):
                    stale.add(node.id)
                if bind.transaction is not None and self.snapshot.table is not None:
                    self.snapshot.table.bound(node.id, transaction=bind.transaction,
                                              as_placed=_as_placed(entry.placement, bind))
                self.attempts.add(task.id, reasons.SCHEDULED, entry.message, entry.nodes,
                                  {**entry.extra, "bound": bind.message})
                codes[task.id] = reasons.SCHEDULED
                continue
            self.snapshot.quotas.forget_bind(task)
            stale.add(node.id)
            if bind.node_overloaded:
                self.overloaded.add(node.id)
            if bind.code == reasons.INTERNAL_ERROR:
                self.attempts.add(task.id, bind.code, bind.message)
                codes[task.id] = bind.code
            elif bind.conflict:
                # Another instance placed the task; its attempt is the one to keep.
                self.attempts.count(reasons.BIND_CONFLICT)
                codes[task.id] = reasons.BIND_CONFLICT
            else:
                entry.in_flight.refused.append(bind)
                entry.in_flight.refused_on.add(node.id)
                retries.append(entry.in_flight)
        # Re-read after the commit: the node then holds exactly what this batch and everyone else bound there.
        refresh_nodes(self.snapshot, stale)
        return retries

    def _bind(self, placements: list[Placement]) -> list[BindOutcome]:
        return bind_placements(self.framework, placements, tenancy=self.snapshot.tenancy)

    def _bind_alone(self, placement: Placement) -> BindOutcome:
        try:
            return self._bind([placement])[0]
        except Exception as error:
            logger.exception("binding task %s failed unexpectedly", placement.task.id)
            return BindOutcome(code=reasons.INTERNAL_ERROR, message=_internal_error_message(error))

    def _unplaced(self, task: TaskInfo, result: ScheduleResult) -> str:
        """No feasible node: PostFilter (preemption) when it can help, and the attempt either way."""
        outcome = self.framework.post_filter(task, result, self.snapshot, handle=self.preemption)
        nodes, extra = attempt_nodes(result)
        if task.id in self.preemption.nominated:
            # The cards its victims free, and the free ones the plan counted on, are the nominee's (design §15.1).
            self.held.hold(task, self.preemption.nominated[task.id], self.snapshot)
        if outcome is not None:
            self.attempts.add(task.id, outcome.code, outcome.message, nodes, {**extra, **outcome.diagnostics})
            return outcome.code
        self.attempts.add(task.id, result.code, result.message, nodes, extra)
        return result.code

    def _not_bound(self, in_flight: _InFlight, result: ScheduleResult) -> str:
        """Feasible nodes, none left to bind to: the binds refused, or every candidate over a load threshold."""
        nodes, extra = attempt_nodes(result)
        if in_flight.refused:
            last = in_flight.refused[-1]
            message = f"{result.message} Bind refused: " + "; ".join(bind.message for bind in in_flight.refused)
            self.attempts.add(in_flight.task.id, last.code, message, nodes, extra)
            return last.code
        code = reasons.LOAD_THRESHOLD_EXCEEDED
        self.attempts.add(in_flight.task.id, code, f"{result.message} Every feasible node is over a load threshold.",
                          nodes, extra)
        return code


def _as_placed(placement: Placement, bind: BindOutcome) -> bool:
    """Whether the database holds the placement as the snapshot applied it (`apply_bind`'s occupant)."""
    task = placement.task
    return Occupant.of_task(task, placement.cards) == Occupant.of_row(
        tenant_id=task.tenant_id, task_type=task.type, gpus=list(bind.cards), shard=bind.shard,
        gpu_memory_mb=task.gpu_memory_mb, card_type=bind.card_type, gpu_required=task.gpu_required,
        cpu_cores=task.cpu_cores, memory_mb=task.memory_mb)


def _bind_candidates(result: ScheduleResult, snapshot: ClusterSnapshot, skipped: set[int]):
    """The framework's choice, then the next best feasible nodes, leaving out `skipped` (nodes over a load
    threshold, nodes that already refused this task)."""
    if result.node.id not in skipped:
        yield result.node
    for node_id in result.ranked_node_ids():
        if node_id != result.node.id and node_id not in skipped:
            yield snapshot.node(node_id)


def take_pending_entries(limit: int = CYCLE_LIMIT) -> list[QueueEntry]:
    """The first `limit` active queue entries (design §15.1). The immediate queue is drained: it only made this
    cycle start sooner, and never reorders the queue."""
    try:
        immediate_queue.drain(immediate_queue.QUEUE_CAPACITY)
    except Exception:  # only a wake-up signal: the queue's order is read from the database
        logger.warning("immediate queue unavailable", exc_info=True)
    return take_active(limit)


def _task_infos(task_ids: list[int]) -> list[TaskInfo]:
    """The tasks still pending, in the given order."""
    rows = Task.objects.filter(id__in=task_ids, status=lifecycle.PENDING).values_list(*TASK_INFO_FIELDS)
    by_id = {row[0]: task_info_from_row(row) for row in rows}
    return [by_id[task_id] for task_id in task_ids if task_id in by_id]


def _record_cycle(started_at, result: CycleResult) -> int:
    with transaction.atomic():
        record = CycleRecord.objects.create(
            started_at=started_at, considered=result.considered, bound=result.bound, failed=result.failed,
            preempting=result.preempting, duration_ms=result.duration_ms,
        )
        figures = result.as_dict()
        transaction.on_commit(lambda: cycle_completed.send(sender=CycleRecord, cycle_id=record.id, **figures))
    return record.id
