"""Scheduling windows of inference groups: outside the window pause, scale or stop; back inside, restore.

The job runs on one scheduler at a time: it holds a PostgreSQL advisory lock for its whole transaction, and a
second instance that cannot take the lock does nothing.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.db import connection, transaction
from django.utils import timezone

from heteroflow_site.validation import REPLICAS_MAX
from scheduling import lifecycle
from scheduling.groups.status import refresh_group_status
from scheduling.housekeeping.isolation import isolated
from scheduling.models import Task, TaskGroup

logger = logging.getLogger(__name__)

WINDOW_LOCK_KEY = 0x4846_5749  # "HFWI": the scheduling-windows leader lock
ACTIONS = ("pause", "scale", "stop")


@dataclass(frozen=True)
class WindowRun:
    leader: bool
    changed_groups: list[int]


def parse_clock(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def validate_window(window: dict) -> dict:
    """Normalise a window definition or raise ValueError naming what is wrong."""
    if not isinstance(window, dict):
        raise ValueError("window must be an object")
    unknown = set(window) - {"days", "start", "end", "timezone", "action", "scale_to"}
    if unknown:
        raise ValueError(f"unknown window fields: {', '.join(sorted(unknown))}")
    days = window.get("days", list(range(7)))
    if not isinstance(days, list) or not days or any(not isinstance(d, int) or not 0 <= d <= 6 for d in days):
        raise ValueError("days must be a non-empty list of weekdays 0 (Monday) … 6 (Sunday)")
    try:
        start, end = parse_clock(window["start"]), parse_clock(window["end"])
    except (KeyError, ValueError, AttributeError):
        raise ValueError("start and end must be HH:MM") from None
    if start == end:
        raise ValueError("start and end must differ")
    zone_name = window.get("timezone", "UTC")
    try:
        ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown timezone {zone_name!r}") from None
    action = window.get("action")
    if action not in ACTIONS:
        raise ValueError("action must be pause, scale or stop")
    scale_to = window.get("scale_to")
    if action == "scale" and (not isinstance(scale_to, int) or not 0 <= scale_to <= REPLICAS_MAX):
        raise ValueError(f"scale_to (an integer from 0 to {REPLICAS_MAX}) is required with action scale")
    return {"days": sorted(set(days)), "start": window["start"], "end": window["end"], "timezone": zone_name,
            "action": action, **({"scale_to": scale_to} if action == "scale" else {})}


def window_contains(window: dict, moment: datetime) -> bool:
    """Whether `moment` lies inside the window, read in the window's own time zone (overnight windows allowed)."""
    local = moment.astimezone(ZoneInfo(window.get("timezone", "UTC")))
    start, end = parse_clock(window["start"]), parse_clock(window["end"])
    days = set(window.get("days", range(7)))
    now = local.time()
    if start < end:
        return local.weekday() in days and start <= now < end
    # Overnight: the part after midnight belongs to the window that opened the day before.
    if now >= start:
        return local.weekday() in days
    return now < end and (local.weekday() - 1) % 7 in days


def apply_scheduling_windows(now: datetime | None = None) -> WindowRun:
    now = now or timezone.now()
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [WINDOW_LOCK_KEY])
            if not cursor.fetchone()[0]:
                return WindowRun(leader=False, changed_groups=[])
        changed = [group.id for group in _groups_with_windows()
                   if isolated(lambda: _apply_to_group(group, now), what=f"scheduling window of group {group.id}")]
        for group_id in changed:
            # The desired replica count is part of what the status says (none wanted and none live: stopped).
            refresh_group_status(group_id)
        _after_leader_work()
    return WindowRun(leader=True, changed_groups=changed)


def _after_leader_work() -> None:
    """Seam for tests that need the leader to hold its lock a little longer."""


def _groups_with_windows():
    groups = (TaskGroup.objects.filter(type="inference", window__isnull=False, stopped_at__isnull=True)
              .exclude(window_applied="stop"))
    # Members before their groups: the order in which every member transition locks (scheduling.groups.status).
    list(Task.objects.select_for_update().filter(group__in=groups).exclude(status__in=lifecycle.TERMINAL_STATES)
         .order_by("id").values_list("id", flat=True))
    return groups.select_for_update().select_related("tenant")


def _apply_to_group(group: TaskGroup, now: datetime) -> bool:
    from scheduling.groups.replicas import set_desired_replicas

    window = group.window
    inside = window_contains(window, now)
    desired = group.replicas or 0
    if not inside and not group.window_applied:
        action = window["action"]
        if action == "stop":
            set_desired_replicas(group, 0, reason="scheduling window: stop")
            group.window_applied = "stop"
            group.save(update_fields=["window_applied", "replicas"])
            return True
        target = 0 if action == "pause" else window["scale_to"]
        if target > desired and not group.tenant.is_active:
            logger.info("group %s: scale-up to %s skipped, tenant %s inactive", group.id, target, group.tenant)
            return False
        group.replicas_before_window = desired
        group.window_applied = action
        set_desired_replicas(group, target, reason=f"scheduling window: {action}")
        group.save(update_fields=["replicas", "replicas_before_window", "window_applied"])
        return True
    if inside and group.window_applied in ("pause", "scale"):
        restored = group.replicas_before_window or 0
        if restored > desired and not group.tenant.is_active:
            logger.info("group %s: restore to %s skipped, tenant %s inactive", group.id, restored, group.tenant)
            return False
        set_desired_replicas(group, restored, reason="scheduling window reopened")
        group.replicas_before_window = None
        group.window_applied = ""
        group.save(update_fields=["replicas", "replicas_before_window", "window_applied"])
        return True
    return False
