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
the tenants' mean usage (divided by their nominal quota, else their `gpu_quota`, when every tenant has one: the share
of their entitlement), over the window and over its second half. With nominal quotas and cohorts (design §16.2) a
task that fits within its tenant's nominal but finds no cards reclaims borrowed work at once, by the §9 plan of
production restricted to borrowed victims (`_reclaim`); a victim waits again, as a new arrival that may no longer
borrow (evicted, it is no longer preemptible), and runs its whole time once placed. The bursting tenant's reclaim
latency is the waiting time of its tasks that were within its nominal quota when they arrived.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from scheduling import lifecycle
from scheduling.fair_share.book import CARD, TypeQuota
from scheduling.framework.snapshot import ClusterSnapshot, TaskInfo
from scheduling.framework.gpu_models import MODEL_LABEL
from scheduling.plugins.fgd import TargetWorkload
from scheduling.preemption.attempt import framework_fit_check
from scheduling.preemption.candidates import ActiveTask
from scheduling.preemption.planner import plan_preemption
from scheduling.replay.big_jobs import BigJobs, DefragSettings
from scheduling.replay.simulate import CAPACITY_TOLERANCE, Placed, Replay
from scheduling.replay.trace import GPU_TYPE, MILLI, TENANT_ID, TraceError, TraceNode, TracePod, to_node, to_task

NO_GPU, FRACTIONAL = "no GPU", "fractional"
SIZE_CLASSES = (NO_GPU, FRACTIONAL, *(f"{cards} cards" if cards > 1 else "1 card" for cards in range(1, 9)))
CURVE_POINTS = 200      # allocation-over-time samples per run
WARMUP_SHARE = 0.01     # the measured window starts once this share of the tasks has arrived
# The waiting queue's order within a priority (design §17.1, §17.4): arrival (FIFO), the tenant's dominant share of
# what it holds now, or its usage decayed with a half-life, each over its nominal.
PRIORITY_ORDER, DOMINANT_SHARE_ORDER, FAIR_SHARE_ORDER = "priority", "dominant-share", "fair-share"
QUEUE_ORDERS = (PRIORITY_ORDER, DOMINANT_SHARE_ORDER, FAIR_SHARE_ORDER)
DEFAULT_HALF_LIFE_SECONDS = 7 * 86400.0
TENANT_KEYS = {"gpu_quota", "nominal", "cohort"}


def size_class(task: TaskInfo) -> str:
    if task.gpu_required:
        return f"{task.gpu_required} cards" if task.gpu_required > 1 else "1 card"
    return FRACTIONAL if task.is_fractional else NO_GPU


@dataclass(frozen=True)
class TenantPlan:
    """`--tenants FILE`: which tenant each pod belongs to, and the tenants' quotas.

    ```json
    {"tenants": {"acme": {"gpu_quota": 40, "nominal": 30, "cohort": "lab"}, "globex": {"nominal": 30}},
     "pods": {"openb-pod-0000": "acme", "openb-pod-0001": "globex"},
     "default": "globex"}
    ```
    `gpu_quota` is design §1's cap in whole cards (left out: none); `nominal` the tenant's nominal quota of the
    trace's GPU type in cards and `cohort` the name of its cohort (design §16.2). With nominal quotas every pod is a
    preemptible batch task of that type (only those may borrow). A pod not listed goes to `default` (required
    when some pod is not listed). Tenant ids are 1, 2, … in the file's order."""

    names: tuple[str, ...]
    quotas: dict[str, int]
    of_pod: dict[str, str]
    default: str | None = None
    nominal: dict[str, float] = field(default_factory=dict)
    cohorts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> TenantPlan:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise TraceError(f"{path}: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("tenants"), dict) or not data["tenants"]:
            raise TraceError(f'{path}: expected {{"tenants": {{name: {{...}}}}, "pods": {{pod: tenant}}}}')
        quotas, nominals, cohorts = {}, {}, {}
        for name, spec in data["tenants"].items():
            unknown = set(spec) - TENANT_KEYS if isinstance(spec, dict) else {"(not an object)"}
            if unknown:
                raise TraceError(f"{path}: tenant {name!r}: unknown key(s) {', '.join(sorted(unknown))}")
            quota = spec.get("gpu_quota")
            if quota is not None:
                if isinstance(quota, bool) or not isinstance(quota, int) or quota < 0:
                    raise TraceError(f"{path}: tenant {name!r}: gpu_quota must be a whole number ≥ 0")
                quotas[name] = quota
            nominal = spec.get("nominal")
            if nominal is not None:
                if isinstance(nominal, bool) or not isinstance(nominal, (int, float)) or not math.isfinite(nominal) \
                        or nominal < 0:
                    raise TraceError(f"{path}: tenant {name!r}: nominal must be a number of cards ≥ 0")
                nominals[name] = nominal
            cohort = spec.get("cohort")
            if cohort is not None:
                if not isinstance(cohort, str) or not cohort:
                    raise TraceError(f"{path}: tenant {name!r}: cohort must be a name")
                cohorts[name] = cohort
        of_pod = data.get("pods", {})
        default = data.get("default")
        names = tuple(data["tenants"])
        wrong = sorted({tenant for tenant in [*of_pod.values(), default] if tenant is not None} - set(names))
        if not isinstance(of_pod, dict) or wrong:
            raise TraceError(f"{path}: pods name unknown tenant(s) {', '.join(map(str, wrong))}")
        return cls(names, quotas, dict(of_pod), default, nominals, cohorts)

    def tenant_id(self, name: str) -> int:
        return self.names.index(name) + 1

    def entitlement(self) -> list[float] | None:
        """What each tenant's share is measured against: its nominal quota, else its `gpu_quota`, when every
        tenant has one."""
        for given in (self.nominal, self.quotas):
            if all(given.get(name) for name in self.names):
                return [float(given[name]) for name in self.names]
        return None

    def fill(self, snapshot: ClusterSnapshot) -> None:
        """The tenants' caps, nominal quotas and cohorts into the snapshot's quota book."""
        book = snapshot.quotas
        book.caps = {self.tenant_id(name): quota * CARD for name, quota in self.quotas.items()}
        book.nominal = {self.tenant_id(name): {GPU_TYPE: TypeQuota(round(nominal * CARD))}
                        for name, nominal in self.nominal.items()}
        cohort_ids = {cohort: number for number, cohort in enumerate(sorted(set(self.cohorts.values())), 1)}
        for name, cohort in self.cohorts.items():
            book.cohort_of[self.tenant_id(name)] = cohort_ids[cohort]
            book.members[cohort_ids[cohort]] = (*book.members.get(cohort_ids[cohort], ()), self.tenant_id(name))

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
    # name → {"mean_gpus", "share_of_quota"?, "curve", "within_nominal_wait_p50"/"_p99"?}
    tenants: dict[str, dict] = field(default_factory=dict)
    jain: float | None = None
    jain_second_half: float | None = None
    evicted: int = 0                          # borrowed tasks evicted by reclaims
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
        if tenants is not None and tenants.nominal:
            task = replace(task, gpu_type=GPU_TYPE, preemptible=True)
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
                 reserve_after: float | None = None, defrag: DefragSettings | None = None,
                 queue_order: str = PRIORITY_ORDER, half_life: float = DEFAULT_HALF_LIFE_SECONDS) -> None:
        if queue_order not in QUEUE_ORDERS:
            raise TraceError(f"queue order must be one of {', '.join(QUEUE_ORDERS)}, not {queue_order!r}")
        if queue_order != PRIORITY_ORDER and (tenants is None or tenants.entitlement() is None):
            raise TraceError(f"the {queue_order} order needs --tenants with a nominal (or gpu_quota) per tenant")
        self.queue_order, self.half_life = queue_order, half_life
        snapshot = ClusterSnapshot(nodes=[to_node(node, index + 1) for index, node in enumerate(nodes)])
        if tenants is not None:
            tenants.fill(snapshot)
        if workload is None:
            workload = TargetWorkload.from_tasks(job.task for job in jobs)
        self.replay = Replay(snapshot, policy=policy, seed=seed, workload=workload)
        self.jobs = jobs
        self.tenants = tenants
        self.big_jobs = (BigJobs(self.replay, reserve_after, defrag) if reserve_after is not None else None)
        # Reclaim's view of what runs: when each task started, the placements admitted by borrowing, and how many
        # such placements were ever made (a shape whose reclaim found no plan is tried again only once there is new
        # borrowed work to evict).
        self.started: dict[int, float] = {}
        self.borrowing: dict[int, Placed] = {}
        self.borrowed_placements = 0
        self.no_plan: dict[tuple, int] = {}
        self.evictions = 0

    def run(self) -> DynamicResult:
        replay, jobs = self.replay, self.jobs
        capacity = replay.capacity_milli
        start = jobs[int(WARMUP_SHARE * len(jobs))].arrives_at if jobs else 0.0
        end = jobs[-1].arrives_at if jobs else 0.0
        span = end - start
        classes = {name: ClassFigures() for name in SIZE_CLASSES}
        tenant_count = len(self.tenants.names) if self.tenants else 1
        held_by_tenant = np.zeros(tenant_count + 1)                     # milli, by tenant id
        # Milli-card-seconds, halved every half-life: what the fair-share order ranks by (design §17.4).
        decayed_by_tenant = np.zeros(tenant_count + 1)
        entitlement = np.array([1.0, *(self.tenants.entitlement() or [])]) if self.tenants else None
        decayed_at = 0.0
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
        # Task id → whether it was within its tenant's nominal quota when it arrived; the waits of those, by tenant;
        # reclaims' victims (they wait again, and their second wait is not counted).
        within_nominal: dict[int, bool] = {}
        within_waits: dict[int, list[float]] = {}
        requeued: set[int] = set()

        def placed_at(job: Job, placed: Placed, moment: float, *, waited: bool = True) -> None:
            if waited:
                figures = classes[size_class(job.task)]
                figures.placed += 1
                figures.waits.append(moment - job.arrives_at)
                if within_nominal.get(job.task.id):
                    within_waits.setdefault(job.task.tenant_id, []).append(moment - job.arrives_at)
            held_by_tenant[job.task.tenant_id] += placed.allocated_milli
            current[job.task.id] = placed
            self.started[job.task.id] = moment
            if replay.snapshot.quotas.is_borrowing(job.task.id):
                self.borrowing[job.task.id] = placed
                self.borrowed_placements += 1
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
            if moment > decayed_at:
                decay = 0.5 ** ((moment - decayed_at) / self.half_life)
                # Held over the stretch, weighed as of its middle.
                decayed_by_tenant = (decayed_by_tenant * decay
                                     + held_by_tenant * (moment - decayed_at) * math.sqrt(decay))
                decayed_at = moment
            freed_rows, quota_freed = set(), set()
            while departures and departures[0][0] <= moment:
                placed = heapq.heappop(departures)[-1]
                if id(placed) in moved_away:
                    moved_away.discard(id(placed))
                    continue
                current.pop(placed.task.id, None)
                self.borrowing.pop(placed.task.id, None)
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
            waiting_ids = {id(job) for job in waiting} if freed else set()
            if self.queue_order != PRIORITY_ORDER and len(candidates) > 1:
                if self.queue_order == DOMINANT_SHARE_ORDER:
                    shares = {tenant_id: book.dominant_share(tenant_id) for tenant_id in range(1, tenant_count + 1)}
                else:
                    shares = dict(enumerate(decayed_by_tenant / entitlement))
                candidates = sorted(candidates, key=lambda job: (shares[job.task.tenant_id], job.arrives_at,
                                                                 job.task.id))
            if big is not None:
                big.before_pass({job.task.id: (job.task, job.arrives_at) for job in [*waiting, *arrived]}, moment)
            still_waiting, failed_shapes = [], set()
            for job in candidates:
                shape = _shape(job.task)
                was_waiting = id(job) in waiting_ids
                reserved = big is not None and big.is_reserved(job.task)
                if reserved:
                    big.release(job.task)
                if job.task.id not in within_nominal:
                    within_nominal[job.task.id] = self._within_nominal(job.task)
                hopeless = not reserved and (shape in failed_shapes or (
                    was_waiting and job.task.tenant_id not in quota_freed and not self._may_fit(job.task, rows)))
                placed = None if hopeless else replay.place(job.task)
                if placed is None and not hopeless:
                    victims = self._reclaim(job.task)
                    for victim in victims:
                        moved_away.add(id(current.pop(victim.task.id)))
                        held_by_tenant[victim.task.tenant_id] -= victim.allocated_milli
                        requeued.add(victim.task.id)
                        # It waits again as a new arrival that may no longer borrow (evicted, it is no longer
                        # preemptible), and runs its whole time once placed.
                        still_waiting.append(Job(replace(victim.task, preemptible=False), moment,
                                                 of_task[victim.task.id].runs_for))
                    placed = replay.place(job.task) if victims else None
                if placed is None:
                    if reserved:
                        big.restore(job.task)
                    failed_shapes.add(shape)
                    still_waiting.append(job)
                    continue
                placed_at(job, placed, moment, waited=job.task.id not in requeued)
            waiting = still_waiting if freed else [*waiting, *still_waiting]
            if big is not None:
                moves, placed = big.after_pass(list(current.values()), moment)
                window_moves += len(moves) if start <= moment <= end else 0
                for move in moves:
                    moved_away.add(id(move.old))
                    self.borrowing.pop(move.old.task.id, None)
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
            curve=curve, evicted=self.evictions)
        if big is not None:
            result.reservations, result.moves = big.reservations, big.moves
            result.evictions_per_hour = window_moves / (span / 3600) if span else 0.0
        if self.tenants is not None:
            means = tenant_integral[1:] / span / MILLI if span else np.zeros(tenant_count)
            entitlement = self.tenants.entitlement()
            shares = means / np.array(entitlement) if entitlement else means
            for name, mean, share, points in zip(self.tenants.names, means, shares, tenant_curves[1:]):
                result.tenants[name] = {"mean_gpus": round(float(mean), 3), "curve": points}
                if entitlement:
                    result.tenants[name]["share_of_quota"] = round(float(share), 4)
                waits = within_waits.get(self.tenants.tenant_id(name))
                if waits:
                    result.tenants[name].update(within_nominal_wait_p50=float(np.percentile(waits, 50)),
                                                within_nominal_wait_p99=float(np.percentile(waits, 99)))
            result.jain = jain_index(shares)
            # The second half of the window, from the curves' samples: when a tenant idle at first competes too.
            if curve:
                second = np.array([points[len(points) // 2:] for points in tenant_curves[1:]], float).mean(axis=1)
                result.jain_second_half = jain_index(second / np.array(entitlement) if entitlement else second)
        return result

    def _within_nominal(self, task: TaskInfo) -> bool:
        book = self.replay.snapshot.quotas
        return task.tenant_id in book.nominal and (book.type_used(task.tenant_id, GPU_TYPE) + book.estimated_share(task)
                                                   <= book.nominal_of(task.tenant_id, GPU_TYPE))

    def _reclaim(self, task: TaskInfo) -> list[Placed]:
        """design §16.2: `task` is within its tenant's nominal but found no cards: evict its cohort's borrowed work
        by production's §9 plan (minimal prefix, fewest victims, borrowed victims only). The victims' placements,
        released; none when no plan frees a node."""
        replay = self.replay
        book = replay.snapshot.quotas
        lenders = book.reclaim_lenders(task)
        if lenders is None or self.no_plan.get(_shape(task)) == self.borrowed_placements:
            return []
        # What borrowed work holds per node. Only nodes where it and what is free could make room, and that the
        # failed attempt did not refuse for good, are planned on: the planner's filter runs are what a replay pays.
        held: dict[int, np.ndarray] = {}
        for placed in self.borrowing.values():
            if placed.task.tenant_id in lenders:
                task_held = np.array([max(placed.task.gpu_required, 1), placed.task.cpu_cores, placed.task.memory_mb])
                held[placed.node.id] = held.get(placed.node.id, 0) + task_held
        incurable = replay.last_result.unresolvable_reasons() if replay.last_result is not None else {}
        table, (cores, memory_mb) = replay.table, replay.capacity_columns()
        free_cards = (table.card_exists & table.card_free).sum(axis=1)
        need = np.array([task.gpu_required, task.cpu_cores - CAPACITY_TOLERANCE, task.memory_mb - CAPACITY_TOLERANCE])
        nodes = []
        for node_id, freed in held.items():
            row = table.row_of[node_id]
            free = np.array([free_cards[row], cores[row] * (1 - table.cpu_usage[row]),
                             memory_mb[row] * (1 - table.memory_usage[row])])
            if node_id not in incurable and (free + freed >= need).all():
                nodes.append(node_id)
        candidates = [self._active(placed, placed.task.id in self.borrowing)
                      for node_id in sorted(nodes) for placed in replay.on_node(node_id)]
        plan = plan_preemption(task, replay.snapshot, candidates, framework_fit_check(replay.framework, replay.snapshot),
                               "running", reclaim_from=lenders).plan if candidates else None
        if plan is None:
            self.no_plan[_shape(task)] = self.borrowed_placements
            return []
        victims = []
        for victim in plan.victims:
            placed = self.borrowing.pop(victim.id)
            replay.release(placed)
            victims.append(placed)
        self.evictions += len(victims)
        return victims

    def _active(self, placed: Placed, borrowed: bool) -> ActiveTask:
        """A running placement as preemption's planner weighs it."""
        task = placed.task
        shard = task.is_fractional
        return ActiveTask(
            id=task.id, node_id=placed.node.id, tenant_id=task.tenant_id, type=task.type, priority=task.priority,
            preemptible=task.preemptible, status=lifecycle.RUNNING,
            created_at=datetime.fromtimestamp(self.started[task.id], tz=timezone.utc), gpu_required=task.gpu_required,
            gpus=tuple(placed.cards), gpu_memory_mb=task.gpu_memory_mb, shard_card=placed.cards[0] if shard else None,
            shard_memory_mb=task.gpu_memory_mb if shard else 0, cpu_cores=task.cpu_cores, memory_mb=task.memory_mb,
            card_type=GPU_TYPE, borrowed=borrowed)

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

