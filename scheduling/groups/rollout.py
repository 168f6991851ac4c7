"""Rolling updates of inference groups (design §17.2): revisions, rolled out and rolled back.

`task_group_update` records a new revision (image, command, env) and makes it the group's: new replicas are of it
from then on. Every `rollout` tick the leader drives each group with a rollout in progress one step, from what
PostgreSQL holds (so a restarted scheduler or web process carries on): it starts new-revision replicas while the
group stays within `replicas + max_surge`, and stops old ones only while the ready replicas left stay at least
`replicas - max_unavailable` (not-ready old ones first, then the newest). The rollout is complete when every replica
is of the new revision and `replicas` of them are ready. A revision not ready within `ready_timeout_seconds`, or
whose replicas crash-loop, is rolled back: the previous revision becomes the group's again and is driven back the
same way, so the ready count holds during the rollback too. One rollout at a time: a partial unique index in the
database, and a 409 `rollout_in_progress`.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from heteroflow_site.errors import TooManyPending
from scheduling.groups.budget import budget_held
from scheduling.groups.crash_loop import crash_loop
from scheduling.groups.refusals import NoChange, RolloutInProgress
from scheduling.groups.replica_state import replica_ready
from scheduling.groups.replicas import add_replicas, live_replicas, stop_replica
from scheduling.groups.scale import ensure_serving, locked_group
from scheduling.groups.status import refresh_group_status
from scheduling.housekeeping.isolation import isolated
from scheduling.models import ROLLOUT_STATES, GroupRevision, TaskGroup
from scheduling.services.task_create import ensure_pending_capacity

logger = logging.getLogger(__name__)

ROLLOUT_LOCK_KEY = 0x4846_524F  # "HFRO": the rollouts leader lock
# Consecutive crashes of the group's replicas during a rollout that read as the new revision crash-looping: the
# crash-loop backoff (scheduling.groups.crash_loop) is then past its first doubling.
ROLLBACK_AFTER_CRASHES = 3
State = GroupRevision.State


@dataclass(frozen=True)
class RolloutRun:
    leader: bool
    stepped: list[int]


def current_revision(group: TaskGroup) -> GroupRevision:
    """The group's revision row; a group from before revisions gets its first one from what it runs."""
    revision, _ = GroupRevision.objects.get_or_create(
        group=group, number=group.revision,
        defaults={"image": group.image, "command": group.command, "env": group.env, "state": State.COMPLETE})
    return revision


def task_group_update(*, group: TaskGroup, image: str | None = None, command: str | None = None,
                      env: dict[str, str] | None = None) -> GroupRevision:
    """Record a new revision from the fields given (the others as the group has them) and start rolling it out."""
    with transaction.atomic():
        locked = locked_group(group.id)
        field = "image" if image is not None else "command" if command is not None else "env"
        ensure_serving(locked, field=field)
        if GroupRevision.objects.filter(group=locked, state__in=ROLLOUT_STATES).exists():
            raise RolloutInProgress(f"group {locked.name!r} is rolling out revision {locked.revision}; wait for it "
                                    f"to finish", field=field)
        previous = current_revision(locked)
        wanted = {"image": previous.image if image is None else image,
                  "command": previous.command if command is None else command,
                  "env": previous.env if env is None else dict(env)}
        if all(wanted[name] == getattr(previous, name) for name in wanted):
            raise NoChange(f"revision {previous.number} already runs this {field}", field=field)
        revision = GroupRevision.objects.create(group=locked, number=previous.number + 1, state=State.ROLLING_OUT,
                                                reason="rolling out", **wanted)
        TaskGroup.objects.filter(id=locked.id, revision=previous.number).update(revision=revision.number, **wanted)
    return revision


def drive_rollouts(now: datetime | None = None) -> RolloutRun:
    """One step of every rollout in progress, on one scheduler at a time (a PostgreSQL advisory lock)."""
    now = now or timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ROLLOUT_LOCK_KEY])
            if not cursor.fetchone()[0]:
                return RolloutRun(leader=False, stepped=[])
        group_ids = list(GroupRevision.objects.filter(state__in=ROLLOUT_STATES, group__stopped_at__isnull=True)
                         .order_by("group_id").values_list("group_id", flat=True))
        stepped = [group_id for group_id in group_ids
                   if isolated(lambda: _step(group_id, now), what=f"rollout of group {group_id}")]
    return RolloutRun(leader=True, stepped=stepped)


def _step(group_id: int, now: datetime) -> bool:
    group = locked_group(group_id)
    revision = GroupRevision.objects.select_for_update().filter(group=group, state__in=ROLLOUT_STATES).first()
    if revision is None:
        return False
    everything = live_replicas(group)
    # A replica already stopping neither serves nor counts against the surge, but the rollout is complete only
    # once it is gone: a user then sees the new revision's replicas only.
    live = [replica for replica in everything if not replica.stopping]
    new = [replica for replica in live if replica.revision == group.revision]
    old = [replica for replica in live if replica.revision != group.revision]
    old_stopping = any(replica.revision != group.revision for replica in everything if replica.stopping)
    desired = group.replicas or 0
    new_ready = sum(replica_ready(group, replica) for replica in new)
    if revision.state == State.ROLLING_OUT:
        failure = _rollout_failure(group, revision, new_ready, now)
        if failure:
            _roll_back(group, revision, failure)
            return True
    if not old and not old_stopping and new_ready >= desired:
        _finish(group, revision, now)
        return True
    ready_total = new_ready + sum(replica_ready(group, replica) for replica in old)
    # Ready replicas that may stop now without the group falling below `replicas - max_unavailable`.
    spare = ready_total - (desired - group.max_unavailable)
    if group.min_available is not None and ready_total - group.min_available < spare:
        spare = ready_total - group.min_available
        if any(replica_ready(group, replica) for replica in old) and spare <= 0:
            budget_held(group, f"rolling update to revision {group.revision} waits: {ready_total} ready, "
                               f"min_available {group.min_available}",
                        figures={"ready": ready_total, "min_available": group.min_available})
    stopped = 0
    # Not-ready ones first (they serve nothing), then the newest.
    for replica in sorted(old, key=lambda replica: (replica_ready(group, replica), -replica.index, -replica.head.id)):
        ready = replica_ready(group, replica)
        if ready and spare <= 0:
            break
        stop_replica(replica, reason=f"rolling update to revision {group.revision}")
        spare -= ready
        stopped += 1
    # The room the stops just made is used in the same step, not the next one (5 s later).
    room = desired + group.max_surge - (len(live) - stopped)
    missing = min(room, desired - len(new))
    if missing > 0 and not crash_loop(group).holds_at(now):
        try:
            ensure_pending_capacity(tenant=group.tenant, adding=missing * group.nodes_per_replica)
        except TooManyPending as refusal:
            logger.warning("group %s: rollout waits, %s new replica(s) not created: %s", group.id, missing, refusal)
            return True
        add_replicas(group, missing)
    return True


def _rollout_failure(group: TaskGroup, revision: GroupRevision, new_ready: int, now: datetime) -> str:
    """Why the revision is rolled back ("" while it may still succeed)."""
    desired = group.replicas or 0
    if new_ready < desired and now - revision.created_at > timedelta(seconds=group.ready_timeout_seconds):
        return (f"revision {revision.number} not ready within {group.ready_timeout_seconds} s "
                f"({new_ready} of {desired} replicas ready)")
    loop = crash_loop(group, revision=revision.number)
    if loop.crashes >= ROLLBACK_AFTER_CRASHES:
        return f"revision {revision.number} is crash-looping ({loop.crashes} crashes in a row)"
    return ""


def _roll_back(group: TaskGroup, revision: GroupRevision, failure: str) -> None:
    previous = (GroupRevision.objects.filter(group=group, number__lt=revision.number).order_by("-number").first())
    revision.state, revision.reason = State.ROLLING_BACK, f"rolling back: {failure}"
    revision.save(update_fields=["state", "reason"])
    TaskGroup.objects.filter(id=group.id, revision=revision.number).update(
        revision=previous.number, image=previous.image, command=previous.command, env=previous.env)
    logger.warning("group %s: %s; rolling back to revision %s", group.id, failure, previous.number)


def _finish(group: TaskGroup, revision: GroupRevision, now: datetime) -> None:
    if revision.state == State.ROLLING_OUT:
        GroupRevision.objects.filter(group=group, state=State.COMPLETE).update(state=State.SUPERSEDED)
        revision.state, revision.reason = State.COMPLETE, f"rolled out: {group.replicas or 0} replica(s) ready"
    else:
        revision.state = State.ROLLED_BACK
        revision.reason = revision.reason.replace("rolling back: ", "rolled back: ", 1)
    revision.finished_at = now
    revision.save(update_fields=["state", "reason", "finished_at"])
    refresh_group_status(group.id)

