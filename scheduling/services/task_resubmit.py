"""A finished task submitted again as it was (the Slurm user's `sbatch job.sh` once more): one click on its page,
`POST /api/v1/tasks/{id}/resubmit`, `hf resubmit ID`."""

from heteroflow_site.errors import Conflict
from scheduling import lifecycle
from scheduling.fair_share.priority import priority_within_ceiling
from scheduling.models import Task
from scheduling.services.task_create import task_create

# What the submitter chose. Not carried over: what the control plane set (placement, env, group membership) and
# the deadline, which has passed or soon will.
SUBMITTED_FIELDS = ("name", "type", "image", "command", "gpu_type", "gpu_required", "gpu_memory_mb",
                    "gpu_compute_percent", "cpu_cores", "memory_mb", "priority", "preemptible", "labels",
                    "tolerations", "node_selector")


def task_resubmit(*, task: Task) -> Task:
    """A new pending task of the same tenant with `task`'s submitted fields; its priority within the tenant's
    ceiling as it is now. Refuses a task still active (stop it first) and a group's member (the group owns it)."""
    if task.status not in lifecycle.TERMINAL_STATES:
        raise Conflict(f"a {task.status} task cannot be resubmitted: it has not finished", field="status")
    if task.group_id is not None:
        raise Conflict("a member of a task group is resubmitted with its group", field="group")
    fields = {name: getattr(task, name) for name in SUBMITTED_FIELDS}
    fields["priority"] = priority_within_ceiling(tenant=task.tenant, priority=fields["priority"])
    return task_create(tenant=task.tenant, **fields)
