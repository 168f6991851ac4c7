from heteroflow_site.errors import Conflict
from scheduling import lifecycle
from scheduling.models import Task
from scheduling.services.task_transition import task_transition

# A pending task has nothing to stop; a placed one goes through `stopping` so the agent can stop its container.
_STOP_ARC = {
    lifecycle.PENDING: lifecycle.STOPPED,
    lifecycle.SCHEDULED: lifecycle.STOPPING,
    lifecycle.RUNNING: lifecycle.STOPPING,
}


def task_stop(*, task: Task, reason: str = "stopped by user") -> Task:
    """Stop a task on behalf of its user, retrying once if the scheduler moved it meanwhile."""
    for _ in range(3):
        current = Task.objects.only("status").get(id=task.id).status
        target = _STOP_ARC.get(current)
        if target is None:
            raise Conflict(f"a {current} task cannot be stopped", field="status")
        if task_transition(task.id, current, target, reason=reason):
            break
    task.refresh_from_db()
    return task
