"""What a node agent reports about its tasks: the arcs only the node running the container can observe."""

from django.db import transaction

from nodes.agent.agent import ENDED_BY_ITSELF
from nodes.models import Node
from scheduling import lifecycle
from scheduling.models import Task
from scheduling.preemption.settle import settle_preempted
from scheduling.services.task_transition import task_transition

# The arcs of the task state machine (docs/scheduling.md) that only the node running the container can observe.
AGENT_ARCS: frozenset[tuple[str, str]] = frozenset(
    {
        (lifecycle.SCHEDULED, lifecycle.RUNNING),
        (lifecycle.RUNNING, lifecycle.SUCCEEDED),
        (lifecycle.RUNNING, lifecycle.FAILED),
        (lifecycle.STOPPING, lifecycle.STOPPED),
        (lifecycle.STOPPING, lifecycle.FAILED),
        (lifecycle.PREEMPTING, lifecycle.PENDING),
        (lifecycle.PREEMPTING, lifecycle.FAILED),
    }
)
# An exit the agent saw before it heard of the task's preemption (design §16.1): a crash stays the task's outcome
# (`preempting → failed`), a clean exit settles as the preemption, never `succeeded`.
_CRASH_REPORT = (lifecycle.RUNNING, lifecycle.FAILED)
_CLEAN_EXIT_REPORT = (lifecycle.RUNNING, lifecycle.SUCCEEDED)
ENDED_BY_ITSELF_REASON = f"{ENDED_BY_ITSELF}, exit code 0"


class AgentArcRefused(Exception):
    """A node token reported a legal transition that only the control plane may make."""


class NotThisNodesTask(Exception):
    """The task does not exist or belongs to another node."""


def agent_report_status(*, node: Node, task_id: int, from_status: str, to_status: str, reason: str = "") -> bool:
    """Apply an agent's report on one of its tasks; True if the CAS won.

    Raises IllegalTransition for a pair outside the state machine, AgentArcRefused for a legal arc the agent does
    not own and NotThisNodesTask for another node's task. The task row stays locked while the transition runs, so
    the task cannot be re-bound to another node between the ownership check and the CAS.
    """
    lifecycle.check_transition(from_status, to_status)
    if (from_status, to_status) not in AGENT_ARCS:
        raise AgentArcRefused(f"agents may not report {from_status} → {to_status}")
    with transaction.atomic():
        placed_on, status = (Task.objects.select_for_update().filter(id=task_id).values_list("node_id", "status")
                             .first() or (None, None))
        if placed_on is None and status is None:
            raise NotThisNodesTask(task_id)
        if placed_on is not None and placed_on != node.id:
            raise NotThisNodesTask(task_id)
        if placed_on is None:
            # Back in the queue (e.g. a preemption the watchdog already settled): this report comes too late.
            return False
        if status == lifecycle.PREEMPTING and (from_status, to_status) == _CLEAN_EXIT_REPORT:
            from_status, to_status, reason = lifecycle.PREEMPTING, lifecycle.PENDING, ENDED_BY_ITSELF_REASON
        if (from_status, to_status) == (lifecycle.PREEMPTING, lifecycle.PENDING):
            # The settlement (placement, counters, preempt_count) belongs to the preemption module; its CAS makes a
            # report that arrives after the watchdog change nothing.
            return settle_preempted(task_id, reason=reason)
        if status == lifecycle.PREEMPTING and (from_status, to_status) == _CRASH_REPORT:
            from_status = lifecycle.PREEMPTING
        if (from_status, to_status) == (lifecycle.STOPPING, lifecycle.STOPPED):
            # A stop the scheduler ordered for a timeout ends as a failure with that reason.
            stopping = Task.objects.only("reason").get(id=task_id)
            if lifecycle.final_status_after_stop(stopping.reason) == lifecycle.FAILED:
                return task_transition(task_id, from_status, lifecycle.FAILED, reason=stopping.reason)
        return task_transition(task_id, from_status, to_status, reason=reason)
