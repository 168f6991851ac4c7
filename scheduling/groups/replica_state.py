"""What a replica of an inference group is and whether it is ready (design §17.1, §17.2): read-only, for the
rebuild loop, rollouts, budgets and endpoints as for the metrics and the pages, which must not import the writes
of `scheduling.groups.replicas` (they stop tasks through the transition service, which records metrics)."""

from dataclasses import dataclass

from scheduling import lifecycle
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, TaskGroup

LIVE_STATES = ACTIVE_STATES | {lifecycle.PENDING}


@dataclass(frozen=True)
class Replica:
    """One replica: its number and its live members by rank (one for a single-node replica)."""

    index: int
    members: tuple[Task, ...]

    @property
    def head(self) -> Task:
        """The member that serves: rank 0 of a multi-node replica (its master), the task of a single-node one."""
        return self.members[0]

    @property
    def revision(self) -> int:
        return self.head.revision

    @property
    def stopping(self) -> bool:
        """Every live member is stopping: it serves nothing and is on its way out."""
        return all(member.status == lifecycle.STOPPING for member in self.members)

    @property
    def node_ids(self) -> set[int]:
        return {member.node_id for member in self.members if member.node_id is not None}


def member_ready(group: TaskGroup, task: Task) -> bool:
    """Available (design §17.2): running, and ready by its probe when the group declares one."""
    return task.status == lifecycle.RUNNING and (group.readiness is None or task.ready)


def replica_ready(group: TaskGroup, replica: Replica) -> bool:
    """Every member of the replica running, its head ready (the probe is of the address it serves on)."""
    return (len(replica.members) == group.nodes_per_replica
            and all(member.status == lifecycle.RUNNING for member in replica.members)
            and member_ready(group, replica.head))


def ready_replica_count(group: TaskGroup, members) -> int:
    """How many replicas of these members of the group (any states, as its page and API read them) are ready."""
    return sum(replica_ready(group, replica)
               for replica in as_replicas(member for member in members if member.status in LIVE_STATES))


def as_replicas(tasks) -> list[Replica]:
    """Tasks grouped by replica, newest replica first, each replica's members by rank; a task without a `replica`
    number is a replica of its own."""
    by_key: dict[tuple[int, int], list[Task]] = {}
    for task in tasks:
        key = (task.replica, 0) if task.replica is not None else (task.rank or 0, task.id)
        by_key.setdefault(key, []).append(task)
    return [Replica(key[0], tuple(sorted(members, key=lambda task: (task.rank or 0, task.id))))
            for key, members in sorted(by_key.items(), reverse=True)]
