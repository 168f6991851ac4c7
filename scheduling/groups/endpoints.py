"""What a router or load balancer reads of a service (design §17.2): its ready replicas' addresses, and its
revisions with what became of each; and what its page shows of it over time: its timeline and the autoscaler's
last hour."""

from collections import Counter
from datetime import datetime, timedelta

from scheduling.groups.replica_state import LIVE_STATES, Replica, as_replicas, replica_ready
from scheduling.groups.replicas import live_replicas
from scheduling.models import GroupEvent, GroupRevision, TaskGroup
from scheduling.selectors import host_address


def ready_replicas(group: TaskGroup) -> list[Replica]:
    """The ready replicas, oldest first."""
    live = as_replicas(group.members.filter(status__in=LIVE_STATES).select_related("node"))
    return [replica for replica in reversed(live) if replica_ready(group, replica)]


def group_endpoints(group: TaskGroup) -> list[dict]:
    """`[{task, replica, node, address, port}]` of the ready replicas: the node's internal address as the runtime
    publishes the port on it; a multi-node replica serves from its master, rank 0 (design §17.1)."""
    return [{"task": head.id, "replica": replica.index, "node": head.node.name,
             "address": host_address(head.node.internal_ip) or None, "port": head.port}
            for replica in ready_replicas(group) if (head := replica.head).node_id is not None]


def group_revisions(group: TaskGroup) -> list[dict]:
    """Each revision, newest first, with how many of its replicas are live and ready now."""
    live, ready = Counter(), Counter()
    for replica in live_replicas(group):
        live[replica.revision] += 1
        ready[replica.revision] += replica_ready(group, replica)
    return [{"number": revision.number, "image": revision.image, "command": revision.command, "env": revision.env,
             "state": revision.state, "reason": revision.reason, "current": revision.number == group.revision,
             "replicas": live[revision.number], "ready": ready[revision.number],
             "created_at": revision.created_at, "finished_at": revision.finished_at}
            for revision in GroupRevision.objects.filter(group=group).order_by("-number")]


def group_timeline(group: TaskGroup, *, limit: int = 30) -> list[GroupEvent]:
    """The group's own timeline (autoscaler decisions, budget holds, refusals), newest first."""
    return list(group.events.order_by("-at", "-id")[:limit])


def autoscale_samples(group: TaskGroup, *, now: datetime) -> list[tuple]:
    """(at, desired, ready, value) of the autoscaler's ticks in the last hour, oldest first."""
    return list(group.metric_samples.filter(at__gte=now - timedelta(hours=1)).order_by("at")
                .values_list("at", "desired", "ready", "value"))
