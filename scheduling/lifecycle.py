"""The task state machine of design §2, as data."""

from scheduling.models import REASON_MAX_LENGTH, TaskStatus

PENDING = TaskStatus.PENDING.value
SCHEDULED = TaskStatus.SCHEDULED.value
RUNNING = TaskStatus.RUNNING.value
PREEMPTING = TaskStatus.PREEMPTING.value
STOPPING = TaskStatus.STOPPING.value
SUCCEEDED = TaskStatus.SUCCEEDED.value
FAILED = TaskStatus.FAILED.value
STOPPED = TaskStatus.STOPPED.value

# States that hold resources: counted by both GPU ledgers and by tenant quotas. Defined here, once.
ACTIVE_STATES: frozenset[str] = frozenset({SCHEDULED, RUNNING, PREEMPTING, STOPPING})
TERMINAL_STATES: frozenset[str] = frozenset({SUCCEEDED, FAILED, STOPPED})

# Reasons the control plane itself gives a task's end (design §11, §15.4).
TIMEOUT_REASON = "Timeout"
NODE_LOST_REASON = "NodeLost"
AGENT_LOST_REASON = "AgentLost"
# A task taken off a quarantined card or a draining node (design §17.3): it goes back to pending through
# `preempting` (its container is stopped first), but that is no preemption — `preempt_count` does not move.
CARD_FAILED_REASON = "CardFailed"
NODE_DRAIN_REASON = "NodeDrain"
HARDWARE_EVICTION_REASONS = (CARD_FAILED_REASON, NODE_DRAIN_REASON)
# A member of a multi-node inference replica stopped because another member was lost (design §17.1): the replica
# is rebuilt whole, and the stopped member did nothing wrong.
REPLICA_MEMBER_LOST_REASON = "ReplicaMemberLost"


def fitting_reason(reason: str) -> str:
    """`reason` shortened to what a task row and its timeline hold: an agent's error output or a gang's cause
    prefixed to a member's reason may run longer, and must never make the transition fail."""
    return reason if len(reason) <= REASON_MAX_LENGTH else reason[: REASON_MAX_LENGTH - 1] + "…"


def final_status_after_stop(reason: str) -> str:
    """What a confirmed stop ends in, by the stopping task's reason: a timed-out task fails with `Timeout`; a
    user's stop is `stopped`."""
    return FAILED if reason == TIMEOUT_REASON else STOPPED

TRANSITIONS: frozenset[tuple[str, str]] = frozenset(
    {
        (PENDING, SCHEDULED),
        (PENDING, STOPPED),
        (SCHEDULED, RUNNING),
        (SCHEDULED, PENDING),
        (SCHEDULED, STOPPING),
        (SCHEDULED, PREEMPTING),
        (RUNNING, SUCCEEDED),
        (RUNNING, FAILED),
        (RUNNING, STOPPING),
        (RUNNING, PREEMPTING),
        # Also a victim that ended by itself before its stop took effect: never `succeeded` (design §16.1).
        (PREEMPTING, PENDING),
        (PREEMPTING, FAILED),
        (STOPPING, STOPPED),
        (STOPPING, FAILED),
    }
)


class IllegalTransition(ValueError):
    def __init__(self, from_status: str, to_status: str):
        super().__init__(f"illegal task transition {from_status} → {to_status}")
        self.from_status = from_status
        self.to_status = to_status


def check_transition(from_status: str, to_status: str) -> None:
    if (from_status, to_status) not in TRANSITIONS:
        raise IllegalTransition(from_status, to_status)
