"""The preemption service the cycle lends the `preempt` plugin's PostFilter (design §9), after a task's attempt
found no node for lack of room: find the candidates, plan the victims (pure, over the snapshot), evict them."""

import random
from dataclasses import replace

from scheduling import lifecycle
from scheduling.framework.framework import Framework
from scheduling.framework.result import ScheduleResult
from scheduling.framework.reasons import PREEMPTION_PENDING, RECLAIM_PENDING
from scheduling.framework.snapshot import ClusterSnapshot, NodeInfo, TaskInfo
from scheduling.framework.status import SUCCESS, Status
from scheduling.preemption.candidates import CandidatePool
from scheduling.preemption.execute import PreemptionOutcome, execute_plan, pending_message
from scheduling.preemption.moves import carry_out, defrag_decision, not_moving
from scheduling.preemption.planner import VICTIM_STATES, FitCheck, PreemptionPlan, may_preempt, plan_preemption
from scheduling.queue.nomination import HeldCards, nominate


class PreemptionHandle:
    """What the `preempt` plugin acts through. `pool` is the cycle's view of the active tasks (read on first
    need and kept current, evictions made here included)."""

    def __init__(self, framework: Framework, pool: CandidatePool, *, reserved: frozenset[int] = frozenset(),
                 held: HeldCards | None = None) -> None:
        self.framework = framework
        self.pool = pool
        # Preemptor id → the node its victims are freeing cards on (it is nominated there, design §15.1).
        self.nominated: dict[int, int] = {}
        # The cycle's reserved jobs (design §16.3), the only tasks defrag acts for, and the cards held this cycle.
        self.reserved = reserved
        self.held = held

    def preempt(self, task: TaskInfo, result: ScheduleResult, snapshot: ClusterSnapshot, *,
                preempt_stage: str) -> PreemptionOutcome | None:
        """Evict lower-priority work so that `task` fits later; None when preemption does not apply to the task.

        An outcome whose `preempting` is true ends the attempt with PreemptionPending: its victims are
        `preempting` (and stay counted) until settled, and the task binds in a later cycle. An outcome without
        victims keeps the failure's code and says in its message why no node could be freed. Either way the
        caller records `outcome.code`, `outcome.message` and `outcome.diagnostics` as the task's attempt.
        """
        found = self.plan(task, result, snapshot, preempt_stage=preempt_stage)
        if not isinstance(found, PreemptionPlan):
            if found is not None and found.preempting:
                self.nominated[task.id] = found.node_id
            return found
        outcome = execute_plan(found, task)
        self.pool.record_preempting(outcome.victims, preemptor_id=task.id)
        if outcome.preempting:
            nominate(task_id=task.id, node_id=found.node_id)
            self.nominated[task.id] = found.node_id
        code = (RECLAIM_PENDING if found.reclaim else outcome.code) if outcome.preempting else result.code
        return replace(outcome, code=code, message=f"{result.message} {outcome.message}")

    def defrag(self, task: TaskInfo, result: ScheduleResult, snapshot: ClusterSnapshot, *, max_moves: int,
               moves_per_hour: int) -> PreemptionOutcome | None:
        """The `defrag` plugin's moves for a reserved job (design §16.3); None for any other task. Moved tasks hold
        their targets' cards for the rest of the cycle, and the job the node the moves empty."""
        if task.id not in self.reserved:
            return None
        decision = defrag_decision(task, snapshot, self.framework, max_moves=max_moves,
                                   moves_per_hour=moves_per_hour)
        if decision.plan is None:
            return not_moving(result, decision)
        outcome = carry_out(decision.plan)
        self.pool.record_preempting(outcome.victims, preemptor_id=task.id)
        if self.held is not None:
            self.held.renominate(task, decision.plan.node.id)
            for move in decision.plan.moves:
                if move.task.id in outcome.victims:
                    self.held.hold(move.task, move.to_node.id, snapshot)
        return replace(outcome, message=f"{result.message} {outcome.message}")

    def plan(self, task: TaskInfo, result: ScheduleResult, snapshot: ClusterSnapshot, *,
             preempt_stage: str) -> PreemptionPlan | PreemptionOutcome | None:
        """What `preempt` would do, evicting nobody: the plan it would carry out; or the outcome it would end
        with — waiting for victims already stopping for `task`, or no node that evicting could free; or None
        when preemption does not apply to the task."""
        victim_states = VICTIM_STATES.get(preempt_stage, frozenset())
        if not victim_states or not may_preempt(task):
            return None
        lenders = snapshot.quotas.reclaim_lenders(task)
        candidates = self.pool.candidates(preemptor_id=task.id, priority=task.priority, victim_states=victim_states)
        if lenders is not None:
            reclaimable = self.pool.reclaim_candidates(preemptor_id=task.id, lender_ids=lenders)
            candidates = list({candidate.id: candidate for candidate in (*candidates, *reclaimable)}.values())
        # Victims already evicted for this task are still stopping: wait for them rather than evict more.
        unsettled = [c for c in candidates if c.status == lifecycle.PREEMPTING and c.preempted_by == task.id]
        if unsettled:
            node_name = _node_name(snapshot, unsettled[0].node_id)
            return PreemptionOutcome(
                code=RECLAIM_PENDING if all(victim.borrowed for victim in unsettled) else PREEMPTION_PENDING,
                message=" ".join((result.message, pending_message(node_name=node_name, victims=unsettled,
                                                                  tenant_id=task.tenant_id))),
                node_name=node_name,
                node_id=unsettled[0].node_id,
                victims=tuple(victim.id for victim in unsettled),
            )
        fit_check = framework_fit_check(self.framework, snapshot)
        if lenders is not None:
            # The tenant's guarantee first: its cohort's borrowed work, whatever its priority (design §16.2).
            reclaim = plan_preemption(task, snapshot, candidates, fit_check, preempt_stage,
                                      result.unresolvable_reasons(), reclaim_from=lenders)
            if reclaim.plan is not None:
                return reclaim.plan
        search = plan_preemption(task, snapshot, candidates, fit_check, preempt_stage,
                                result.unresolvable_reasons())
        if search.plan is None:
            return PreemptionOutcome(code=result.code, message=f"{result.message} {search.failure_message}",
                                     node_reasons=search.node_reasons)
        return search.plan


def framework_fit_check(framework: Framework, snapshot: ClusterSnapshot) -> FitCheck:
    """Whether `task` fits `node` by the framework's whole filter chain, run on that node alone."""

    def fits(task: TaskInfo, node: NodeInfo) -> Status:
        alone = ClusterSnapshot(nodes=[node], tenancy=snapshot.tenancy)
        result = framework.schedule(task, alone, random.Random(task.id))
        if result.node is not None:
            return SUCCESS
        return result.rejection(node.id) or Status.unschedulable(result.message)

    return fits


def _node_name(snapshot: ClusterSnapshot, node_id: int) -> str:
    node = snapshot.node(node_id)
    return node.name if node is not None else f"node {node_id}"
