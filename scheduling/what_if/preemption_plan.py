"""Preview of a preemption: what the `preempt` PostFilter would do for one pending task now, evicting nobody.

The task is attempted on the cluster as it is now, by the plugin set the scheduler runs with; when no node takes
it, the real PostFilter runs with a preemption handle that plans and stops there (`PreemptionHandle.plan`), so the
preview is the decision a cycle taking this task first would carry out. A tenant sees its own victims by id; of
other tenants' victims only how many there are and their priorities (design §15.6).

A plan reads the whole cluster, so it is computed once per scheduling cycle for a task and viewer and kept in the
cache under the cycle's generation (`metrics.last_cycle_stamp`): the cluster it is computed from is the one the
cycle saw. Whether the task is still pending is read on every call (the caller's own read of the task it shows).
The process keeps the generation's snapshot and framework too, so the plans of other tasks in that generation are
computed on it as a cycle schedules its tasks one after another on one snapshot (planning evicts nobody, so it
leaves the snapshot as it found it), for GENERATION_SECONDS at most (a stopped scheduler ends no generation). A new
generation's snapshot comes from the process's own scheduler cache (`SnapshotCache`), which re-reads only the nodes
changed since the last generation: reading the whole cluster afresh took ~1 s at 5,000 nodes, once per cycle in
every web process. What a plan reads (a new generation's cluster, a plan's candidates) it reads in one read-only
transaction.

Without any cycle (no scheduler has run since Redis started, or Redis is unreachable) the plans are not cached, but
they still share the process's snapshot for GENERATION_SECONDS: one snapshot per page view would cost each view of a
pending task the whole cluster's read while the scheduler is down.
"""

import logging
import random
import threading
import time
from collections.abc import Iterable
from typing import Any

from django.core.cache import cache

from scheduling import lifecycle, metrics
from scheduling.cache.snapshot_builder import prepare_admission, task_info_from_task
from scheduling.cache.snapshot_cache import SnapshotCache
from scheduling.framework.framework import Framework
from scheduling.framework.registry import PluginSet
from scheduling.framework.result import ScheduleResult
from scheduling.framework.snapshot import ClusterSnapshot, SchedulerConfig, TaskInfo
from scheduling.models import Task
from scheduling.plugins.preempt import TRIGGER_CODES
from scheduling.preemption.attempt import PreemptionHandle
from scheduling.preemption.candidates import ActiveTask, CandidatePool
from scheduling.preemption.execute import PreemptionOutcome
from scheduling.preemption.planner import VICTIM_STATES, PreemptionPlan, may_preempt
from scheduling.selectors import current_plugin_set
from scheduling.what_if.read_only import read_only_transaction

logger = logging.getLogger(__name__)

NOT_PENDING = "NotPending"
FITS_NOW = "FitsWithoutPreemption"
# A cycle runs every 5 s or sooner; without one (the scheduler stopped) a plan is still recomputed after this.
CACHE_SECONDS = 60
# A cycle's interval: how long the process plans other tasks on a generation's snapshot.
GENERATION_SECONDS = 5.0
# The generation of plans made while no cycle has run: it ends only with GENERATION_SECONDS.
NO_CYCLE = "no-cycle"


class _PlanOnly(PreemptionHandle):
    """The handle the preview lends the preempt plugin: it plans as the cycle's handle does and evicts nobody."""

    def preempt(self, task: TaskInfo, result: ScheduleResult, snapshot: ClusterSnapshot, *,
                preempt_stage: str) -> PreemptionPlan | PreemptionOutcome | None:
        return self.plan(task, result, snapshot, preempt_stage=preempt_stage)


def preemption_plan(*, task: Task, viewer_tenant_id: int | None) -> dict[str, Any]:
    """`{"node", "victims": [{"task", "priority"}], "frees": {...}, "reclaim"}` when evicting would make room for the
    task (`"stopping": true` when its victims were evicted already and are stopping), else `{"code", "message"}`.
    `task` is as the caller has just read it (the page or the API request showing it: the plan reads it no more);
    `viewer_tenant_id` is the tenant asking (None for staff): other tenants' victims are shown to it without id."""
    if task.status != lifecycle.PENDING:
        return {"code": NOT_PENDING, "message": f"Task {task.id} is {task.status}: only a pending task preempts."}
    info = task_info_from_task(task)
    generation = _cycle_generation()
    if generation is None:
        return _plan_in_generation(info, viewer_tenant_id, NO_CYCLE)
    key = f"preemption-plan:{task.id}:{viewer_tenant_id if viewer_tenant_id is not None else 'staff'}:{generation}"
    return cache.get_or_set(key, lambda: _plan_in_generation(info, viewer_tenant_id, generation), CACHE_SECONDS)


class _Generation:
    """The cluster of one cycle generation as plans read it: its plugin set, framework and snapshot."""

    def __init__(self, stamp: str) -> None:
        self.stamp = stamp
        self.read_at = time.monotonic()
        # The snapshot outlives the block: only generations use `_snapshots`, one at a time under _generation_lock,
        # and the next generation's look is what changes it.
        with _snapshots.snapshot(SchedulerConfig.from_settings()) as snapshot:
            self.cluster = _cluster(snapshot)


_generation: _Generation | None = None
# One plan at a time uses the generation's snapshot (a plan's filters and scores fill its per-cycle caches).
_generation_lock = threading.Lock()
_snapshots = SnapshotCache(prunes_log=False)


def _plan_in_generation(task: TaskInfo, viewer_tenant_id: int | None, stamp: str) -> dict[str, Any]:
    """The plan, with the generation's cluster read afresh when it is another cycle's or too old; whatever either
    reads (the cluster, a plan's candidates) in one read-only transaction."""
    global _generation
    with _generation_lock, read_only_transaction():
        if (_generation is None or _generation.stamp != stamp
                or time.monotonic() - _generation.read_at >= GENERATION_SECONDS):
            _generation = None  # the previous cluster is not kept while the next one is read
            _generation = _Generation(stamp)
        return _plan(task, viewer_tenant_id, cluster=_generation.cluster)


def _cycle_generation() -> str | None:
    try:
        return metrics.last_cycle_stamp()
    except Exception:  # Redis unreachable: plan without the cache rather than not at all
        logger.warning("no cycle generation: the preemption plan is computed uncached", exc_info=True)
        return None


def _cluster(snapshot: ClusterSnapshot) -> tuple[PluginSet, Framework, ClusterSnapshot]:
    """The plugin set, its framework and `snapshot` ready to plan on."""
    plugin_set = current_plugin_set()
    return plugin_set, Framework(plugin_set, SchedulerConfig.from_settings()), prepare_admission(snapshot)


def _plan(task: TaskInfo, viewer_tenant_id: int | None, *,
          cluster: tuple[PluginSet, Framework, ClusterSnapshot]) -> dict[str, Any]:
    plugin_set, framework, snapshot = cluster
    result = framework.schedule(task, snapshot, random.Random(task.id))
    if result.node is not None:
        return {"code": FITS_NOW, "message": f"{result.message} It fits on {result.node.name} now: "
                                             "nothing needs evicting."}
    handle = _PlanOnly(framework, CandidatePool())
    found = framework.post_filter(task, result, snapshot, handle=handle)
    if isinstance(found, PreemptionPlan):
        # A reclaim (design §16.2) evicts the cohort's borrowed work for a task within its nominal quota.
        return {**_plan_body(found.node_name, found.victims, viewer_tenant_id), "reclaim": found.reclaim}
    if isinstance(found, PreemptionOutcome) and found.preempting:
        stopping = _stopping_victims(handle.pool, task, found.victims, plugin_set.preempt_stage)
        return {**_plan_body(found.node_name, stopping, viewer_tenant_id), "stopping": True}
    if isinstance(found, PreemptionOutcome):
        # Staff read each node's reason; a tenant how many nodes gave each (node names may be others').
        return {"code": found.code, "message": found.message,
                **{key: value for key, value in found.diagnostics["preemption"].items()
                   if key == "node_reason_counts" or (key == "node_reasons" and viewer_tenant_id is None)}}
    return {"code": result.code, "message": f"{result.message} {_not_applicable(task, result, plugin_set)}"}


def _plan_body(node_name: str, victims: Iterable[ActiveTask], viewer_tenant_id: int | None) -> dict[str, Any]:
    victims = list(victims)
    shown = [{"task": victim.id if viewer_tenant_id in (None, victim.tenant_id) else None,
              "priority": victim.priority} for victim in victims]
    return {
        "node": node_name,
        "victims": shown,
        "other_tenants_victims": sum(entry["task"] is None for entry in shown),
        "frees": {
            "gpus": sum(victim.gpu_required for victim in victims),
            "cards": sorted({index for victim in victims for index in victim.cards}),
            "gpu_memory_mb": sum(victim.shard_memory_mb for victim in victims),
            "cpu_cores": sum(victim.cpu_cores for victim in victims),
            "memory_mb": sum(victim.memory_mb for victim in victims),
        },
    }


def _stopping_victims(pool: CandidatePool, task: TaskInfo, victim_ids: Iterable[int],
                      preempt_stage: str) -> list[ActiveTask]:
    wanted = set(victim_ids)
    candidates = pool.candidates(preemptor_id=task.id, priority=task.priority,
                                 victim_states=VICTIM_STATES[preempt_stage])
    return sorted((victim for victim in candidates if victim.id in wanted), key=lambda victim: victim.id)


def _not_applicable(task: TaskInfo, result: ScheduleResult, plugin_set: PluginSet) -> str:
    """Why the PostFilter left the task alone, in the words of the task page."""
    if result.pre_filtered:
        return "Evicting other work would not help."
    if plugin_set.preempt_stage == "disabled":
        return "Preemption is disabled."
    if not may_preempt(task):
        return f"{task.type.capitalize()} tasks never preempt."
    if result.code not in TRIGGER_CODES:
        return f"Evicting other work cannot cure {result.code}."
    return "No plugin would evict for it."
