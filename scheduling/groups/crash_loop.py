"""Crash-loop backoff of inference replicas: a replica that keeps failing is not recreated every rebuild tick
forever (10 s) but after a delay that doubles with each consecutive crash up to a cap, as kube's CrashLoopBackOff.

A crash is a replica that failed less than `replica_stable_seconds` after it started (or before it started); the
consecutive crashes are counted back from the group's newest ended replica, and any other ending (a replica that
ran long enough, succeeded, or was stopped) ends the count. A replica that failed with its node or agent lost is
passed over: that says nothing of the replica, and its successor comes at once. A multi-node replica (design §17.1)
crashes once however many of its members failed, and the members stopped because another one was lost are passed
over. Derived from the members' own rows: nothing to keep in step, and the group page reads the same figure.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from scheduling import lifecycle
from scheduling.models import TaskGroup

# More consecutive crashes than this read as this many: the delay is at its cap long before.
_COUNTED = 20
_NOT_THE_REPLICAS_FAULT = (lifecycle.NODE_LOST_REASON, lifecycle.AGENT_LOST_REASON)


@dataclass(frozen=True)
class CrashLoop:
    crashes: int
    last_crash_at: datetime | None
    delay: timedelta

    @property
    def next_replica_at(self) -> datetime | None:
        """When the rebuild loop may create a replica again; None when it is not holding back."""
        return self.last_crash_at + self.delay if self.crashes and self.last_crash_at else None

    def holds_at(self, now: datetime) -> bool:
        return self.next_replica_at is not None and now < self.next_replica_at


def backoff_delay(crashes: int) -> timedelta:
    """The wait after `crashes` consecutive crashes: the base, doubled per further crash, at most the cap."""
    if crashes <= 0:
        return timedelta(0)
    base, cap = settings.SCHEDULER["replica_backoff_seconds"], settings.SCHEDULER["replica_backoff_max_seconds"]
    return timedelta(seconds=min(base * 2 ** min(crashes - 1, _COUNTED), cap))


def crash_loop(group: TaskGroup, *, revision: int | None = None) -> CrashLoop:
    """The group's current crash loop, from its newest ended replicas (one query); of one revision's replicas only
    when `revision` is given (a rollout judges its own revision, not the one it replaces)."""
    stable = timedelta(seconds=settings.SCHEDULER["replica_stable_seconds"])
    ended = group.members.filter(status__in=lifecycle.TERMINAL_STATES, finished_at__isnull=False)
    if revision is not None:
        ended = ended.filter(revision=revision)
    ended = (ended.order_by("-finished_at", "-id")
             .values_list("status", "started_at", "finished_at", "reason", "replica")[:_COUNTED])
    crashes, last_crash_at, crashed_replicas = 0, None, set()
    for status, started_at, finished_at, reason, replica in ended:
        if status == lifecycle.FAILED and reason.startswith(_NOT_THE_REPLICAS_FAULT):
            continue
        if status == lifecycle.STOPPED and reason.startswith(lifecycle.REPLICA_MEMBER_LOST_REASON):
            continue
        if status != lifecycle.FAILED or (started_at is not None and finished_at - started_at >= stable):
            break
        if replica is not None:
            if replica in crashed_replicas:
                continue
            crashed_replicas.add(replica)
        crashes += 1
        last_crash_at = last_crash_at or finished_at
    return CrashLoop(crashes=crashes, last_crash_at=last_crash_at, delay=backoff_delay(crashes))
