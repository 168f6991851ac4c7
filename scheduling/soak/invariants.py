"""What must hold however a soak run's processes die, read in one consistent snapshot of the database.

Each check returns sentences naming the evidence; an empty list is a pass. During the run they are checked every
few seconds (`during_run`); after the quiet period at the end, also what needs the system to have settled
(`after_quiet`), and whether agents and the control plane agree, counting only what disagrees in two reads
15 s apart (`agent_disagreements`): tasks still start and end at the end, inference replicas are rebuilt.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path

import psutil
from django.db.models import Count
from django.utils import timezone

from nodes.agent.runtime import container_name
from nodes.models import GPU
from scheduling import lifecycle
from scheduling.framework.occupancy import cards_held
from scheduling.housekeeping.ledger_audit import ledger_audit
from scheduling.housekeeping.loops import UNCLAIMED_AFTER
from scheduling.models import Task, TaskEvent, TaskGroup, TaskType
from scheduling.preemption.watchdog import CONFIRMATION_TIMEOUT
from scheduling.soak.cluster import NODE_LOST_TIMEOUT_SECONDS
from scheduling.soak.tenants import Ledger
from scheduling.what_if.read_only import read_only_transaction

# How long a task may stay in a transient state before a loop must have moved it (the loop's own limit, one of its
# periods, and a margin for a loop that was itself killed and restarted).
SLACK = timedelta(seconds=120)
TRANSIENT_LIMITS = {
    lifecycle.SCHEDULED: UNCLAIMED_AFTER + SLACK,
    lifecycle.PREEMPTING: CONFIRMATION_TIMEOUT + SLACK,
    lifecycle.STOPPING: timedelta(seconds=NODE_LOST_TIMEOUT_SECONDS) + SLACK,
}


def during_run(ledger: Ledger, *, now: datetime | None = None) -> list[str]:
    with read_only_transaction():
        return [*exactly_once(ledger), *legal_histories(), *ledgers_agree(), *no_state_outlived_its_loop(now=now),
                *nothing_placed_on_a_quarantined_card()]


def after_quiet(ledger: Ledger) -> list[str]:
    with read_only_transaction():
        return [*during_run(ledger), *no_gang_half_running()]


def exactly_once(ledger: Ledger) -> list[str]:
    """Every submission the API acknowledged exists, with its id; none exists twice (a lost answer may or may
    not have created its task — never two)."""
    with ledger.lock:
        tasks, groups = dict(ledger.tasks), dict(ledger.groups)
    found = []
    for model, submitted, what in ((Task, tasks, "task"), (TaskGroup, groups, "group")):
        rows = model.objects.filter(name__in=list(submitted)).values_list("name", "id")
        ids_by_name: dict[str, list[int]] = defaultdict(list)
        for name, row_id in rows:
            ids_by_name[name].append(row_id)
        for name, acknowledged in submitted.items():
            ids = ids_by_name.get(name, [])
            if len(ids) > 1:
                found.append(f"{what} {name} exists {len(ids)} times (ids {sorted(ids)})")
            elif acknowledged is not None and ids != [acknowledged]:
                found.append(f"{what} {name} was acknowledged as id {acknowledged} but the database has {ids}")
    return found


def legal_histories() -> list[str]:
    """Every recorded transition is legal (design §2) and follows the one before it."""
    found = []
    last_to: dict[int, str] = {}
    for task_id, from_status, to_status in TaskEvent.objects.order_by("task_id", "at", "id").values_list(
            "task_id", "from_status", "to_status"):
        if not from_status:
            last_to[task_id] = to_status
            continue
        if (from_status, to_status) not in lifecycle.TRANSITIONS:
            found.append(f"task {task_id}: illegal transition {from_status} → {to_status}")
        elif task_id in last_to and last_to[task_id] != from_status:
            found.append(f"task {task_id}: {from_status} → {to_status} after it had become {last_to[task_id]}")
        last_to[task_id] = to_status
    current = dict(Task.objects.filter(id__in=list(last_to)).values_list("id", "status"))
    found += [f"task {task_id} is {current[task_id]} but its last transition made it {status}"
              for task_id, status in last_to.items() if task_id in current and current[task_id] != status]
    return found


def ledgers_agree() -> list[str]:
    """No card held by two active whole-card tasks, and each node's gpu_used equals the recount (audit_ledgers)."""
    found = []
    for node in ledger_audit().nodes:
        if node.gpu_used_wrong:
            found.append(f"node {node.name}: gpu_used {node.stored_gpu_used}, active tasks hold "
                         f"{node.recounted_gpu_used}")
        if node.double_booked:
            found.append(f"node {node.name}: cards {list(node.double_booked)} held by several active tasks")
    return found


def nothing_placed_on_a_quarantined_card() -> list[str]:
    """design §17.3: no active task was placed on a card after that card was quarantined."""
    quarantined = {(node_id, card_type, index): since for node_id, card_type, index, since in
                   GPU.objects.filter(quarantined_at__isnull=False).values_list("node_id", "type", "index",
                                                                                "quarantined_at")}
    if not quarantined:
        return []
    found = []
    for task_id, node_id, node_type, card_type, gpus, shard, scheduled_at in Task.objects.filter(
            status__in=lifecycle.ACTIVE_STATES, node_id__in={key[0] for key in quarantined}).values_list(
            "id", "node_id", "node__gpu_type", "card_type", "gpus", "shard", "scheduled_at"):
        for index in cards_held(gpus, shard):
            since = quarantined.get((node_id, card_type or node_type, index))
            if since is not None and scheduled_at is not None and scheduled_at > since:
                found.append(f"task {task_id} placed at {scheduled_at:%H:%M:%S} on card {index} of node {node_id}, "
                             f"quarantined since {since:%H:%M:%S}")
    return found


def no_state_outlived_its_loop(*, now: datetime | None = None) -> list[str]:
    now = now or timezone.now()
    found = []
    for status, limit in TRANSIENT_LIMITS.items():
        for task_id, since in Task.objects.filter(status=status, status_changed_at__lt=now - limit).values_list(
                "id", "status_changed_at"):
            found.append(f"task {task_id} {status} since {since:%H:%M:%S}, longer than {limit.total_seconds():.0f} s")
    return found


def agent_disagreements(fleet_state: Path, online_nodes: list[str]) -> set[tuple[str, int, str]]:
    """(node, task id, which side) where an online node's agent and the control plane disagree: a task `running` by
    the control plane that the agent does not run, or a process the agent runs for a task the control plane does
    not expect a container for (running, stopping, preempting). The simulated runtime records each process as
    `<task id>.pid`."""
    expected: dict[str, dict[int, str]] = defaultdict(dict)
    for node_name, task_id, status in Task.objects.filter(
            status__in=(lifecycle.RUNNING, lifecycle.STOPPING, lifecycle.PREEMPTING),
            node__name__in=online_nodes).values_list("node__name", "id", "status"):
        expected[node_name][task_id] = status
    found = set()
    for node_name in online_nodes:
        folder = fleet_state / node_name
        agent = {int(pid.stem) for pid in folder.glob("*.pid") if _runs(pid)} if folder.is_dir() else set()
        found |= {(node_name, task_id, "control plane only") for task_id, status in expected[node_name].items()
                  if status == lifecycle.RUNNING and task_id not in agent}
        found |= {(node_name, task_id, "agent only") for task_id in agent - set(expected[node_name])}
    return found


def agents_agree(disagreements: set[tuple[str, int, str]]) -> list[str]:
    """The disagreements as sentences, one per node."""
    by_node: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for node_name, task_id, side in sorted(disagreements):
        by_node[node_name][side].append(task_id)
    return [f"node {node_name}: the control plane has {sides.get('control plane only', [])} running that its agent "
            f"does not run; the agent runs {sides.get('agent only', [])} the control plane does not expect"
            for node_name, sides in sorted(by_node.items())]


def _runs(pid_file: Path) -> bool:
    """The simulated task of `pid_file` still runs: its process is alive and is that task's (not a reused pid)."""
    try:
        process = psutil.Process(int(pid_file.read_text()))
        return process.status() != psutil.STATUS_ZOMBIE and container_name(int(pid_file.stem)) in " ".join(
            process.cmdline())
    except (OSError, ValueError, psutil.Error):
        return False


def no_gang_half_running() -> list[str]:
    """No training gang has some members of its current run active and others not."""
    found = []
    gangs = TaskGroup.objects.filter(type=TaskType.TRAINING, world_size__gt=1).values_list("id", "name", "restarts")
    for group_id, name, run in gangs:
        states = Counter(Task.objects.filter(group_id=group_id, group_run=run).values_list("status", flat=True))
        active = sum(count for status, count in states.items() if status in lifecycle.ACTIVE_STATES)
        if 0 < active < sum(states.values()):
            found.append(f"gang {name}: members {dict(sorted(states.items()))}")
    return found


def tasks_by_status() -> dict[str, int]:
    return dict(Task.objects.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
