"""The design §12 attempt codes, and the one-line summary of the reasons nodes were filtered for (each plugin,
the framework's chain included, defines its own reasons in `scheduling/plugins/<name>/`).

Reasons are short human phrases because the diagnostics summary counts them:
`0/12 nodes are available: 3 Insufficient GPU, 8 GPU type mismatch, 1 dedicated to another tenant.`
"""

from collections.abc import Mapping

# Each plugin defines its own reasons (`scheduling/plugins/<name>/`) and says which of them freeing resources (a
# task ending, a preemption) can cure (`RowPlugin.resolvable`): kube-scheduler's Unschedulable vs
# UnschedulableAndUnresolvable.

# design §12 attempt codes.
NO_SCHEDULABLE_NODES = "NoSchedulableNodes"
INSUFFICIENT_RESOURCES = "InsufficientResources"
# A task's cpu_cores / memory_mb beside what the node's active tasks book exceed its registered size (§16.1).
INSUFFICIENT_HOST_RESOURCES = "InsufficientHostResources"
NO_TENANT_ELIGIBLE_GPU = "NoTenantEligibleGPU"
PREEMPTION_PENDING = "PreemptionPending"
# A reclaim (design §16.2) evicts borrowed work of the cohort so that a task within its nominal quota fits.
RECLAIM_PENDING = "ReclaimPending"
QUOTA_EXCEEDED = "QuotaExceeded"
GPU_TYPE_UNAVAILABLE = "GPUTypeUnavailable"
LOAD_THRESHOLD_EXCEEDED = "LoadThresholdExceeded"
PORTS_EXHAUSTED = "PortsExhausted"
SHARD_ALLOCATION_FAILED = "ShardAllocationFailed"
GANG_INCOMPLETE = "GangIncomplete"
BIND_CONFLICT = "BindConflict"
TENANT_INACTIVE = "TenantInactive"
# No registered node of the task's type could hold it even empty (`scheduling.framework.never_fits`).
NEVER_FITS = "NeverFits"
INTERNAL_ERROR = "InternalError"
SCHEDULED = "Scheduled"

ERROR_CODES = (
    NO_SCHEDULABLE_NODES, INSUFFICIENT_RESOURCES, NO_TENANT_ELIGIBLE_GPU, PREEMPTION_PENDING, QUOTA_EXCEEDED,
    GPU_TYPE_UNAVAILABLE, LOAD_THRESHOLD_EXCEEDED, PORTS_EXHAUSTED, SHARD_ALLOCATION_FAILED, GANG_INCOMPLETE,
    BIND_CONFLICT, TENANT_INACTIVE, INTERNAL_ERROR, INSUFFICIENT_HOST_RESOURCES, RECLAIM_PENDING, NEVER_FITS,
)
# The attempt evicted work for the task, which binds once its victims have stopped.
VICTIMS_STOPPING = frozenset({PREEMPTION_PENDING, RECLAIM_PENDING})


def summarize(total_nodes: int, reason_counts: Mapping[str, int]) -> str:
    """The one-line summary: available count, then reasons most frequent first, ties alphabetical."""
    unavailable = sum(reason_counts.values())
    available = max(total_nodes - unavailable, 0)
    head = f"{available}/{total_nodes} nodes are available"
    ordered = sorted(((count, reason) for reason, count in reason_counts.items() if count),
                     key=lambda item: (-item[0], item[1]))
    if not ordered:
        return head + "."
    return head + ": " + ", ".join(f"{count} {reason}" for count, reason in ordered) + "."
