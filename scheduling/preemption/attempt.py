"""The cycle's entry into preemption (SPEC §9): called after a task's normal attempt failed."""

import random
from dataclasses import replace

from scheduling import lifecycle
from scheduling.framework.framework import Framework, ScheduleResult
from scheduling.framework.reasons import INSUFFICIENT_RESOURCES, NO_SCHEDULABLE_NODES, PREEMPTION_PENDING
from scheduling.framework.registry import PluginSet
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, SchedulerConfig, TaskInfo
from scheduling.framework.status import SUCCESS, Status
from scheduling.preemption.candidates import CandidatePool, preemption_candidates
from scheduling.preemption.execute import PreemptionOutcome, execute_plan, pending_message
from scheduling.preemption.planner import (
    VICTIM_STATES,
    FitCheck,
    may_preempt,
    plan_preemption,
)

# Only a lack of room is something evicting lower-priority work can cure.
TRIGGER_CODES = frozenset({NO_SCHEDULABLE_NODES, INSUFFICIENT_RESOURCES})


def try_preemption(task: TaskInfo, result: ScheduleResult, snapshot: ClusterSnapshot, plugin_set: PluginSet, *,
                   pool: CandidatePool | None = None, framework: Framework | None = None) -> PreemptionOutcome | None:
    """Evict lower-priority work so that `task` fits later; None when preemption does not apply to this failure.

    An outcome whose `preempting` is true ends the attempt with PreemptionPending: its victims are `preempting`
    (and stay counted) until settled, and the task binds in a later cycle. An outcome without victims keeps the
    failure's code and says in its message why no node could be freed. Either way the caller records
    `outcome.code`, `outcome.message` and `outcome.diagnostics` as the task's attempt.

    A cycle passes its `pool` (the active tasks, read once and kept current, evictions made here included) and
    its `framework`; without them the candidates are read and a framework built for this one attempt.
    """
    stage = plugin_set.preempt_stage
    victim_states = VICTIM_STATES.get(stage, frozenset())  # `disabled` allows none
    if result.code not in TRIGGER_CODES or not victim_states or not may_preempt(task):
        return None
    find = pool.candidates if pool is not None else preemption_candidates
    candidates = find(preemptor_id=task.id, priority=task.priority, victim_states=victim_states)
    # Victims already evicted for this task are still stopping: wait for them rather than evict more.
    unsettled = [c for c in candidates if c.status == lifecycle.PREEMPTING and c.preempted_by == task.id]
    if unsettled:
        node_name = _node_name(snapshot, unsettled[0].node_id)
        return PreemptionOutcome(
            code=PREEMPTION_PENDING,
            message=f"{result.message} {pending_message(node_name=node_name, victims=unsettled)}",
            node_name=node_name,
            victims=tuple(victim.id for victim in unsettled),
        )
    framework = framework or Framework(plugin_set, SchedulerConfig.from_settings())
    fit_check = framework_fit_check(framework, snapshot)
    search = plan_preemption(task, snapshot, candidates, fit_check, stage, result.filtered)
    if search.plan is None:
        return PreemptionOutcome(code=result.code, message=f"{result.message} {search.failure_message}",
                                 node_reasons=search.node_reasons)
    outcome = execute_plan(search.plan, task)
    if pool is not None:
        pool.record_preempting(outcome.victims, preemptor_id=task.id)
    code = outcome.code if outcome.preempting else result.code
    return replace(outcome, code=code, message=f"{result.message} {outcome.message}")


def framework_fit_check(framework: Framework, snapshot: ClusterSnapshot) -> FitCheck:
    """Whether `task` fits `node` by the framework's whole filter chain, run on that node alone."""

    def fits(task: TaskInfo, node: NodeInfo) -> Status:
        alone = ClusterSnapshot(nodes=[node], tenancy=snapshot.tenancy)
        result = framework.schedule(task, alone, random.Random(task.id))
        if result.node is not None:
            return SUCCESS
        return result.filtered.get(node.id) or Status.unschedulable(result.message)

    return fits


def _node_name(snapshot: ClusterSnapshot, node_id: int) -> str:
    node = snapshot.node(node_id)
    return node.name if node is not None else f"node {node_id}"
