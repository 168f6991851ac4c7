"""The replay with departures (design §15.9, `replay_trace --dynamic`): tasks arrive at their trace `creation_time`
and leave `deletion_time − creation_time` after they were placed; a task that does not fit waits.

Time: arrivals are `creation_time − first creation_time`, divided by `compress` (arrivals come `compress` times as
fast; how long each task runs is kept, so the load grows `compress`-fold). The waiting queue is the real queue
order (design §15.1): priority (all alike in a trace), then arrival, then id; a task that does not fit is parked and
becomes active again when something that could make it fit happens — in a replay, a task leaving. So at each moment
of the replay (one or more departures and arrivals at the same second) the tasks that left are released first, then
the newly arrived join the queue, then one pass places what it can: after a departure every waiting task in queue
order, otherwise only the newly arrived (nothing else could fit: nothing was freed). Within a pass a task whose
twin (same shape, same tenant) already failed is not tried again: the framework would refuse it for the same
reasons. And since after every pass no waiting task fits anywhere, after a departure a waiting task can only fit on
the nodes that tasks just left (or anywhere, when its tenant's quota was freed): it is tried only when one of those
nodes has the cards, CPU and memory it asks for (`_may_fit`, a necessary condition; the framework decides). Placement
is the production framework and plugins on the in-memory snapshot (`Replay.place`), as in the static replay. Seeds
break score ties.

Figures, per size class (no GPU, fractional, 1 … 8 cards): tasks, placed, never placed (still waiting when the
last task left), p50 and p99 waiting time of the placed; the time-weighted allocation (GPU capacity held,
integrated over the measured window, over all GPUs × its length); allocation over time. The window runs from the
arrival of the first `WARMUP_SHARE` of the tasks to the last arrival: openb's first pods arrive months before the
rest (the long-running pods of the trace's start), and an empty cluster waiting for them would say nothing. With `--tenants
FILE` (`TenantPlan`): each tenant's GPUs held over time, its time-weighted mean, and Jain's fairness index over
the tenants' mean usage (divided by their `gpu_quota` when every tenant has one: the share of their entitlement).
"""

from __future__ import annotations

import heapq
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from scheduling.fair_share.book import CARD
from scheduling.framework.snapshot import ClusterSnapshot, TaskInfo
from scheduling.gpu_models import MODEL_LABEL
from scheduling.plugins.fgd import TargetWorkload
from scheduling.replay.big_jobs import BigJobs, DefragSettings
from scheduling.replay.simulate import CAPACITY_TOLERANCE, Placed, Replay
from scheduling.replay.trace import MILLI, TENANT_ID, TraceError, TraceNode, TracePod, to_node, to_task

NO_GPU, FRACTIONAL = "no GPU", "fractional"
SIZE_CLASSES = (NO_GPU, FRACTIONAL, *(f"{cards} cards" if cards > 1 else "1 card" for cards in range(1, 9)))
CURVE_POINTS = 200      # allocation-over-time samples per run
WARMUP_SHARE = 0.01     # the measured window starts once this share of the tasks has arrived
TENANT_KEYS = {"gpu_quota"}


def size_class(task: TaskInfo) -> str:
    if task.gpu_required:
        return f"{task.gpu_required} cards" if task.gpu_required > 1 else "1 card"
    return FRACTIONAL if task.is_fractional else NO_GPU


@dataclass(frozen=True)
class TenantPlan:
    """`--tenants FILE`: which tenant each pod belongs to, and the tenants' quotas.

    ```json
    {"tenants": {"acme": {"gpu_quota": 40}, "globex": {}},
     "pods": {"openb-pod-0000": "acme", "openb-pod-0001": "globex"},
     "default": "globex"}
    ```
    `gpu_quota` is design §1's cap in whole cards (left out: none); a pod not listed goes to `default` (required
    when some pod is not listed). Tenant ids are 1, 2, … in the file's order."""

    names: tuple[str, ...]
    quotas: dict[str, int]
    of_pod: dict[str, str]
    default: str | None = None

    @classmethod
    def read(cls, path: Path) -> TenantPlan:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise TraceError(f"{path}: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("tenants"), dict) or not data["tenants"]:
            raise TraceError(f'{path}: expected {{"tenants": {{name: {{...}}}}, "pods": {{pod: tenant}}}}')
        quotas = {}
        for name, spec in data["tenants"].items():
            unknown = set(spec) - TENANT_KEYS if isinstance(spec, dict) else {"(not an object)"}
            if unknown:
                raise TraceError(f"{path}: tenant {name!r}: unknown key(s) {', '.join(sorted(unknown))}")
            quota = spec.get("gpu_quota")
            if quota is not None:
                if isinstance(quota, bool) or not isinstance(quota, int) or quota < 0:
                    raise TraceError(f"{path}: tenant {name!r}: gpu_quota must be a whole number ≥ 0")
                quotas[name] = quota
        of_pod = data.get("pods", {})
        default = data.get("default")
        names = tuple(data["tenants"])
        wrong = sorted({tenant for tenant in [*of_pod.values(), default] if tenant is not None} - set(names))
        if not isinstance(of_pod, dict) or wrong:
            raise TraceError(f"{path}: pods name unknown tenant(s) {', '.join(map(str, wrong))}")
        return cls(names, quotas, dict(of_pod), default)

    def tenant_id(self, name: str) -> int:
        return self.names.index(name) + 1

    def assign(self, pods: Sequence[TracePod]) -> list[int]:
        """Each pod's tenant id."""
        ids = []
        for pod in pods:
            tenant = self.of_pod.get(pod.name, self.default)
            if tenant is None:
                raise TraceError(f"pod {pod.name} has no tenant and the file names no default")
            ids.append(self.tenant_id(tenant))
        return ids


@dataclass(frozen=True)
class Job:
    """One trace pod as the dynamic replay sees it."""

    task: TaskInfo
    arrives_at: float       # seconds into the replay
    runs_for: float         # seconds it holds its cards once placed


@dataclass
class ClassFigures:
    tasks: int = 0
    placed: int = 0
    waits: list[float] = field(default_factory=list)

    @property
    def never_placed(self) -> int:
        return self.tasks - self.placed

    def summary(self) -> dict:
        waits = np.array(self.waits) if self.waits else None
        return {"tasks": self.tasks, "placed": self.placed, "never_placed": self.never_placed,
                "wait_p50": float(np.percentile(waits, 50)) if waits is not None else None,
                "wait_p99": float(np.percentile(waits, 99)) if waits is not None else None}


@dataclass
class DynamicResult:
    seed: int
    tasks: int
    never_placed: int
    time_weighted_allocation: float           # %
    window: tuple[float, float]               # the measured window, seconds into the replay
    classes: dict[str, dict]                  # size class → ClassFigures.summary()
    curve: list[tuple[float, float]]          # (hours into the window, allocated %)
    tenants: dict[str, dict] = field(default_factory=dict)   # name → {"mean_gpus", "share_of_quota"?, "curve"}
    jain: float | None = None
    # With reservation (`big_jobs`): jobs reserved, tasks defrag moved, and moves per hour of the window.
    reservations: int = 0
    moves: int = 0
    evictions_per_hour: float = 0.0


def jobs_of(pods: Sequence[TracePod], *, compress: float = 1.0, tenants: TenantPlan | None = None) -> list[Job]:
    """The pods as jobs in arrival order (ties by trace order); pods need their times (`read_pod_times`)."""
    if any(pod.creation_time is None or pod.deletion_time is None for pod in pods):
        raise TraceError("the dynamic replay needs creation_time and deletion_time for every pod")
    tenant_ids = tenants.assign(pods) if tenants is not None else [TENANT_ID] * len(pods)
    start = min(pod.creation_time for pod in pods)
    jobs = []
    for index, (pod, tenant_id) in enumerate(zip(pods, tenant_ids)):
        task = replace(to_task(pod, index + 1), tenant_id=tenant_id)
        jobs.append(Job(task, (pod.creation_time - start) / compress, float(pod.deletion_time - pod.creation_time)))
    jobs.sort(key=lambda job: (job.arrives_at, job.task.id))
    return jobs


def multi_card_mix(pods: Sequence[TracePod], share: float, *, seed: int = 0) -> list[TracePod]:
    """The trace with `share` of its whole 1-card pods (drawn with `seed`) asking 2, 4 or 8 cards instead (a third
    each): a multi-card-heavy mix with the trace's own times (openb's multigpu20 list has none)."""
    draws = np.random.default_rng(seed)
    mixed = []
    for pod in pods:
        if pod.num_gpu == 1 and not pod.shared and draws.random() < share:
            pod = replace(pod, num_gpu=int(draws.choice((2, 4, 8))))
        mixed.append(pod)
    return mixed


def _shape(task: TaskInfo) -> tuple:
    return (task.tenant_id, task.gpu_required, task.gpu_memory_mb, task.cpu_cores, task.memory_mb, task.gpu_type,
            task.labels.get(MODEL_LABEL, ""))


class DynamicReplay:
    """One dynamic replay of `jobs` on `nodes` under one policy and seed."""

    def __init__(self, nodes: Sequence[TraceNode], jobs: Sequence[Job], *, policy: str, seed: int,
                 tenants: TenantPlan | None = None, workload: TargetWorkload | None = None,
                 reserve_after: float | None = None, defrag: DefragSettings | None = None) -> None:
        snapshot = ClusterSnapshot(nodes=[to_node(node, index + 1) for index, node in enumerate(nodes)])
        if tenants is not None:
            snapshot.quotas.caps = {tenants.tenant_id(name): quota * CARD for name, quota in tenants.quotas.items()}
        if workload is None:
            workload = TargetWorkload.from_tasks(job.task for job in jobs)
        self.replay = Replay(snapshot, policy=policy, seed=seed, workload=workload)
        self.jobs = jobs
        self.tenants = tenants
        self.big_jobs = (BigJobs(self.replay, reserve_after, defrag) if reserve_after is not None else None)

    def run(self) -> DynamicResult:
        replay, jobs = self.replay, self.jobs
        capacity = replay.capacity_milli
        start = jobs[int(WARMUP_SHARE * len(jobs))].arrives_at if jobs else 0.0
        end = jobs[-1].arrives_at if jobs else 0.0
        span = end - start
        classes = {name: ClassFigures() for name in SIZE_CLASSES}
        tenant_count = len(self.tenants.names) if self.tenants else 1
        held_by_tenant = np.zeros(tenant_count + 1)                     # milli, by tenant id
        tenant_integral = np.zeros(tenant_count + 1)
        tenant_curves: list[list[float]] = [[] for _ in range(tenant_count + 1)]
        departures: list[tuple[float, int, int, Placed]] = []   # (leaves at, task id, placement number, …)
        waiting: list[Job] = []
        curve: list[tuple[float, float]] = []
        integral, now, next_job = 0.0, start, 0
        sample_every = span / CURVE_POINTS if span else 1.0
        next_sample = start
        for job in jobs:
            classes[size_class(job.task)].tasks += 1
        big = self.big_jobs
        of_task = {job.task.id: job for job in jobs}
        current: dict[int, Placed] = {}     # task id → where it runs now
        moved_away: set[int] = set()        # ids of Placed a defrag move ended before their departure
        window_moves = 0
        placements = itertools.count()     # a moved task may leave twice at one time: the heap never compares Placed

        def placed_at(job: Job, placed: Placed, moment: float, *, waited: bool = True) -> None:
            if waited:
                figures = classes[size_class(job.task)]
                figures.placed += 1
                figures.waits.append(moment - job.arrives_at)
            held_by_tenant[job.task.tenant_id] += placed.allocated_milli
            current[job.task.id] = placed
            heapq.heappush(departures, (moment + job.runs_for, job.task.id, next(placements), placed))

        while next_job < len(jobs) or departures:
            moment = min(jobs[next_job].arrives_at if next_job < len(jobs) else np.inf,
                         departures[0][0] if departures else np.inf)
            measured_until = min(moment, end)
            if measured_until > now:
                integral += replay.allocated_milli * (measured_until - now)
                tenant_integral += held_by_tenant * (measured_until - now)
            while next_sample <= min(moment, end):
                curve.append((round((next_sample - start) / 3600, 4), round(100.0 * replay.allocated_milli / capacity, 3)))
                for tenant_id in range(1, tenant_count + 1):
                    tenant_curves[tenant_id].append(round(held_by_tenant[tenant_id] / MILLI, 3))
                next_sample += sample_every
            now = max(now, measured_until)
            freed_rows, quota_freed = set(), set()
            while departures and departures[0][0] <= moment:
                placed = heapq.heappop(departures)[-1]
                if id(placed) in moved_away:
                    moved_away.discard(id(placed))
                    continue
                current.pop(placed.task.id, None)
                replay.release(placed)
                held_by_tenant[placed.task.tenant_id] -= placed.allocated_milli
                freed_rows.add(replay.table.row_of[placed.node.id])
                quota_freed.add(placed.task.tenant_id)
            freed = bool(freed_rows)
            # A task leaving frees quota for its tenant (and, in a cohort, for those it lends to): their tasks may
            # now fit on any node.
            book = replay.snapshot.quotas
            quota_freed = set(book.caps) | set(book.nominal) | set(book.cohort_of) if quota_freed else set()
            rows = np.array(sorted(freed_rows), np.int64)
            arrived = []
            while next_job < len(jobs) and jobs[next_job].arrives_at <= moment:
                arrived.append(jobs[next_job])
                next_job += 1
            candidates = [*waiting, *arrived] if freed else arrived
            if big is not None:
                big.before_pass({job.task.id: (job.task, job.arrives_at) for job in [*waiting, *arrived]}, moment)
            still_waiting, failed_shapes = [], set()
            for position, job in enumerate(candidates):
                shape = _shape(job.task)
                was_waiting = freed and position < len(waiting)
                reserved = big is not None and big.is_reserved(job.task)
                if reserved:
                    big.release(job.task)
                hopeless = not reserved and (shape in failed_shapes or (
                    was_waiting and job.task.tenant_id not in quota_freed and not self._may_fit(job.task, rows)))
                placed = None if hopeless else replay.place(job.task)
                if placed is None:
                    if reserved:
                        big.restore(job.task)
                    failed_shapes.add(shape)
                    still_waiting.append(job)
                    continue
                placed_at(job, placed, moment)
            waiting = still_waiting if freed else [*waiting, *still_waiting]
            if big is not None:
                moves, placed = big.after_pass(list(current.values()), moment)
                window_moves += len(moves) if start <= moment <= end else 0
                for move in moves:
                    moved_away.add(id(move.old))
                    held_by_tenant[move.old.task.tenant_id] -= move.old.allocated_milli
                    # A moved task starts again from the beginning on its target.
                    placed_at(of_task[move.new.task.id], move.new, moment, waited=False)
                if placed is not None:
                    job = of_task[placed.task.id]
                    waiting = [other for other in waiting if other is not job]
                    placed_at(job, placed, moment)

        result = DynamicResult(
            seed=replay.seed, tasks=len(jobs), never_placed=len(waiting),
            time_weighted_allocation=100.0 * integral / (capacity * span) if span and capacity else 0.0,
            window=(start, end), classes={name: figures.summary() for name, figures in classes.items() if figures.tasks},
            curve=curve)
        if big is not None:
            result.reservations, result.moves = big.reservations, big.moves
            result.evictions_per_hour = window_moves / (span / 3600) if span else 0.0
        if self.tenants is not None:
            means = tenant_integral[1:] / span / MILLI if span else np.zeros(tenant_count)
            for name, mean, points in zip(self.tenants.names, means, tenant_curves[1:]):
                result.tenants[name] = {"mean_gpus": round(float(mean), 3), "curve": points}
            quotas = [self.tenants.quotas.get(name) for name in self.tenants.names]
            shares = means / np.array(quotas, float) if all(quotas) else means
            for name, share in zip(self.tenants.names, shares):
                if all(quotas):
                    result.tenants[name]["share_of_quota"] = round(float(share), 4)
            result.jain = jain_index(shares)
        return result

    def _may_fit(self, task: TaskInfo, rows: np.ndarray) -> bool:
        """Whether one of `rows` has the free cards (or a card with the shard's memory), CPU and memory `task` asks
        for, ignoring everything else the filters check: False means no filter chain could place it there."""
        table, cores, memory_mb = self.replay.table, *self.replay.capacity_columns()
        fits = (cores[rows] * (1 - table.cpu_usage[rows]) >= task.cpu_cores - CAPACITY_TOLERANCE) & (
            memory_mb[rows] * (1 - table.memory_usage[rows]) >= task.memory_mb - CAPACITY_TOLERANCE)
        if task.gpu_required:
            fits &= (table.card_exists[rows] & table.card_free[rows]).sum(axis=1) >= task.gpu_required
        elif task.is_fractional:
            fits &= (table.card_exists[rows] & table.card_no_whole[rows]
                     & (table.card_free_mb[rows] >= task.gpu_memory_mb)).any(axis=1)
        return bool(fits.any())


def jain_index(values: Sequence[float] | np.ndarray) -> float | None:
    """Jain's fairness index (Σx)² / (n Σx²): 1 when all are equal, 1/n when one has everything."""
    values = np.asarray(values, float)
    square_sum = float((values ** 2).sum())
    return float(values.sum() ** 2 / (len(values) * square_sum)) if len(values) and square_sum else None

