"""What a router or load balancer reads of a service (design §17.2): its ready replicas' addresses, and its
revisions with what became of each; and what its page shows of it over time: its timeline and the autoscaler's
last hour."""

from datetime import datetime, timedelta

from django.db.models import Count, Q

from scheduling import lifecycle
from scheduling.groups.budget import replica_ready
from scheduling.models import GroupEvent, GroupRevision, Task, TaskGroup
from scheduling.selectors import host_address


def ready_replicas(group: TaskGroup) -> list[Task]:
    running = (group.members.filter(status=lifecycle.RUNNING).select_related("node").order_by("rank", "id"))
    return [task for task in running if replica_ready(group, task)]


def group_endpoints(group: TaskGroup) -> list[dict]:
    """`[{task, replica, node, address, port}]` of the ready replicas: the node's internal address as the runtime
    publishes the port on it."""
    return [{"task": task.id, "replica": task.rank, "node": task.node.name,
             "address": host_address(task.node.internal_ip) or None, "port": task.port}
            for task in ready_replicas(group) if task.node_id is not None]


def group_revisions(group: TaskGroup) -> list[dict]:
    """Each revision, newest first, with how many of its replicas are live and ready now."""
    counts = {row["revision"]: row for row in group.members.values("revision").annotate(
        live=Count("id", filter=~Q(status__in=lifecycle.TERMINAL_STATES)),
        ready=Count("id", filter=Q(status=lifecycle.RUNNING) & (Q(ready=True) if group.readiness else Q())))}
    return [{"number": revision.number, "image": revision.image, "command": revision.command, "env": revision.env,
             "state": revision.state, "reason": revision.reason, "current": revision.number == group.revision,
             "replicas": counts.get(revision.number, {}).get("live", 0),
             "ready": counts.get(revision.number, {}).get("ready", 0),
             "created_at": revision.created_at, "finished_at": revision.finished_at}
            for revision in GroupRevision.objects.filter(group=group).order_by("-number")]


def group_timeline(group: TaskGroup, *, limit: int = 30) -> list[GroupEvent]:
    """The group's own timeline (autoscaler decisions, budget holds, refusals), newest first."""
    return list(group.events.order_by("-at", "-id")[:limit])


def autoscale_samples(group: TaskGroup, *, now: datetime) -> list[tuple]:
    """(at, desired, ready, value) of the autoscaler's ticks in the last hour, oldest first."""
    return list(group.metric_samples.filter(at__gte=now - timedelta(hours=1)).order_by("at")
                .values_list("at", "desired", "ready", "value"))
