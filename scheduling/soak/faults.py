"""The faults a soak run injects on a seeded schedule, and the time until the system is back after each.

Back means: a scheduling cycle has run since the fault ended, and every node whose agent is alive is online again.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from pathlib import Path

import psutil
import requests
from django.db import connection

from heteroflow_site.errors import DomainError
from scheduling import lifecycle
from scheduling.cycle.turns import CYCLE_LOCK_KEY
from scheduling.framework.occupancy import cards_held
from scheduling.soak.cluster import HEARTBEAT_TIMEOUT_SECONDS, NODE_LOST_TIMEOUT_SECONDS
from scheduling.soak.processes import Supervisor

KINDS = ("scheduler", "worker-beat", "redis", "postgres", "agents-lost", "agents-restart", "bad-requests",
         "card-fails")
RECOVERY_LIMIT_SECONDS = 180.0
REDIS_DOWN_SECONDS = 5.0
# Bodies no valid request has: each must get a 4xx, never a 5xx.
BAD_REQUESTS = [
    ("post", "/api/v1/tasks", b"{not json"),
    ("post", "/api/v1/tasks", b'{"name": 12, "gpu_required": "many", "image": ["x"]}'),
    ("post", "/api/v1/tasks", b'{"name": "x", "image": "a", "command": "c", "priority": 1e309}'),
    ("post", "/api/v1/tasks", b'{"name": "\\u0000", "image": "a", "command": "c"}'),
    ("post", "/api/v1/task-groups", b'{"type": "training", "world_size": -1}'),
    ("post", "/api/v1/tasks/999999999/stop", b"{}"),
    ("get", "/api/v1/tasks?tenant=abc", b""),
    ("get", "/api/v1/tasks/notanid", b""),
    ("post", "/api/v1/agent/heartbeat", b'{"gpus": "all"}'),
]


@dataclass
class FaultRecord:
    kind: str
    at: float  # seconds since the run started
    detail: str
    recovery_seconds: float | None  # None: not back within RECOVERY_LIMIT_SECONDS


@dataclass
class FaultContext:
    supervisor: Supervisor
    servers: list[str]
    token: str  # a tenant's API token, for the bad requests
    database: str
    fleet_nodes: dict[str, list[str]]  # fleet process name → its nodes' names
    violations: list[str]
    fleet_state: Path | None = None  # the fleets' --state-dir, where card faults are injected


def schedule(kinds: list[str], *, minutes: float, seed: int) -> list[tuple[float, str]]:
    """(seconds after the start, kind): every kind at least once, spread over the run after a warm-up and before
    the quiet end, in a seeded order; long runs repeat the kinds."""
    rng = random.Random(seed)
    start, end = 45.0, max(60.0, minutes * 60 - 75)
    rounds = max(1, int((end - start) // (len(kinds) * 60)))
    order = [kind for _ in range(rounds) for kind in rng.sample(kinds, len(kinds))]
    step = (end - start) / max(len(order), 1)
    return [(start + step * position, kind) for position, kind in enumerate(order)]


def inject(kind: str, context: FaultContext, rng: random.Random) -> str:
    """Do the fault; a sentence saying what was done."""
    return FAULTS[kind](context, rng)


def _kill_scheduler(context: FaultContext, rng: random.Random) -> str:
    names = context.supervisor.names("scheduler")
    holder = _turn_holder(context, names)
    name = holder or rng.choice(names)
    context.supervisor.kill(name)
    return f"SIGKILL {name}" + (" (it held the turn)" if holder else " (no instance held the turn at that moment)")


def _turn_holder(context: FaultContext, names: list[str]) -> str | None:
    """The scheduler process whose connection holds the cycle's advisory lock, watched for a few seconds."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT a.client_port FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                           "WHERE l.locktype = 'advisory' AND l.granted AND l.objid = %s AND a.datname = %s",
                           [CYCLE_LOCK_KEY, context.database])
            ports = {row[0] for row in cursor.fetchall()}
        for name in names:
            managed = context.supervisor.processes[name]
            if managed.alive and ports & _local_ports(managed.pid):
                return name
        time.sleep(0.05)
    return None


def _local_ports(pid: int) -> set[int]:
    try:
        return {conn.laddr.port for conn in psutil.Process(pid).net_connections(kind="tcp") if conn.laddr}
    except psutil.Error:
        return set()


def _kill_worker_and_beat(context: FaultContext, rng: random.Random) -> str:
    for name in ("worker", "beat"):
        context.supervisor.kill(name)
    return "SIGKILL worker and beat"


def _restart_redis(context: FaultContext, rng: random.Random) -> str:
    context.supervisor.processes["redis"].held = True
    context.supervisor.kill("redis")
    time.sleep(REDIS_DOWN_SECONDS)
    context.supervisor.start("redis")
    return f"Redis killed, started again {REDIS_DOWN_SECONDS:.0f} s later (empty: it keeps nothing)"


def _terminate_backends(context: FaultContext, rng: random.Random) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = %s AND pid <> pg_backend_pid()", [context.database])
        terminated = cursor.fetchone()[0]
    connection.close()
    return f"{terminated} PostgreSQL backends terminated"


def _lose_agents(context: FaultContext, rng: random.Random) -> str:
    name = rng.choice(sorted(context.fleet_nodes))
    managed = context.supervisor.processes[name]
    managed.held = True
    context.supervisor.kill(name, signal.SIGSTOP)
    stopped_for = NODE_LOST_TIMEOUT_SECONDS + 20
    time.sleep(stopped_for)
    context.supervisor.kill(name, signal.SIGCONT)
    managed.held = False
    return f"SIGSTOP {name} ({len(context.fleet_nodes[name])} agents) for {stopped_for} s, then SIGCONT"


def _restart_agents(context: FaultContext, rng: random.Random) -> str:
    name = rng.choice(sorted(context.fleet_nodes))
    # The agents die, their tasks' processes (the containers) do not: the new agents adopt them.
    context.supervisor.restart(name, children=False)
    return f"SIGKILL {name} ({len(context.fleet_nodes[name])} agents) and started again: they adopt their tasks"


def _bad_requests(context: FaultContext, rng: random.Random) -> str:
    answered = 0
    for _ in range(3):
        for method, path, body in BAD_REQUESTS:
            server = rng.choice(context.servers)
            try:
                response = requests.request(method, server + path, data=body, timeout=10,
                                            headers={"Authorization": f"Token {context.token}",
                                                     "Content-Type": "application/json"})
            except requests.RequestException:
                continue
            answered += 1
            if response.status_code >= 500:
                context.violations.append(f"bad request {method.upper()} {path} answered {response.status_code}")
    return f"{answered} bad requests"


# design §17.3: the tasks of a failed card must be off it (pending again, or elsewhere) within one liveness period.
CARD_FAULT_LIVENESS_SECONDS = HEARTBEAT_TIMEOUT_SECONDS


def _fail_a_card(context: FaultContext, rng: random.Random) -> str:
    """A card of a live agent's node fails, preferably one a task runs on; its tasks must leave it within one
    liveness period. The card is then repaired and released, so the run keeps its capacity."""
    from nodes.agent.simulated_health import card_fault_clear, card_fault_inject
    from nodes.card_health import card_release
    from nodes.models import GPU
    from scheduling.models import Task

    live = [node for name, nodes in context.fleet_nodes.items() if context.supervisor.processes[name].alive
            for node in nodes]
    held = [(node_name, card_type or "", gpus) for node_name, card_type, gpus in Task.objects.filter(
        status=lifecycle.RUNNING, node__name__in=live, gpu_required__gt=0).values_list(
        "node__name", "card_type", "gpus")]
    if held:
        node_name, card_type, gpus = rng.choice(sorted(held))
        index = gpus[0]
    else:
        node_name = rng.choice(sorted(live))
        index, card_type = GPU.objects.filter(node__name=node_name).values_list("index", "type").first()
    card = GPU.objects.select_related("node").get(node__name=node_name, index=index,
                                                  **({"type": card_type} if card_type else {}))
    on_card = [task_id for task_id, gpus, shard in Task.objects.filter(
        node=card.node, status__in=(lifecycle.SCHEDULED, lifecycle.RUNNING)).values_list("id", "gpus", "shard")
        if index in cards_held(gpus, shard)]
    card_fault_inject(context.fleet_state / node_name, card_type=card.type, index=index)
    injected = time.monotonic()
    left_after = None
    while time.monotonic() - injected < CARD_FAULT_LIVENESS_SECONDS + 5:
        still = [task_id for task_id, gpus, shard, node_id in Task.objects.filter(
            id__in=on_card, status__in=lifecycle.ACTIVE_STATES).values_list("id", "gpus", "shard", "node_id")
            if node_id == card.node_id and index in cards_held(gpus, shard)]
        if not still and GPU.objects.filter(id=card.id, quarantined_at__isnull=False).exists():
            left_after = time.monotonic() - injected
            break
        time.sleep(0.5)
    if left_after is None or left_after > CARD_FAULT_LIVENESS_SECONDS:
        context.violations.append(f"card-fails: tasks {on_card} of {node_name} {card.type}{index} not off the "
                                  f"quarantined card within {CARD_FAULT_LIVENESS_SECONDS} s")
    card_fault_clear(context.fleet_state / node_name, card_type=card.type, index=index)
    healthy_by = time.monotonic() + CARD_FAULT_LIVENESS_SECONDS
    while time.monotonic() < healthy_by and GPU.objects.filter(id=card.id, health="failed").exists():
        time.sleep(0.5)
    released = False
    try:
        card_release(node=card.node, card=GPU.objects.get(id=card.id), actor=None)
        released = True
    except DomainError as refusal:
        context.violations.append(f"card-fails: {node_name} {card.type}{index} could not be released: {refusal}")
    taken = "never" if left_after is None else f"{left_after:.1f} s"
    return (f"{node_name} {card.type}{index} failed under tasks {on_card}: off the card after {taken}; "
            f"repaired and {'released' if released else 'not released'}")


FAULTS: dict[str, Callable[[FaultContext, random.Random], str]] = {
    "scheduler": _kill_scheduler,
    "worker-beat": _kill_worker_and_beat,
    "redis": _restart_redis,
    "postgres": _terminate_backends,
    "agents-lost": _lose_agents,
    "agents-restart": _restart_agents,
    "bad-requests": _bad_requests,
    "card-fails": _fail_a_card,
}


def recovered(context: FaultContext, since_wall: float) -> bool:
    """A cycle ran after `since_wall` (epoch seconds) and every node of a live, running fleet process is online."""
    from datetime import UTC, datetime

    from nodes.models import Node
    from scheduling.models import CycleRecord

    context.supervisor.revive_dead()
    try:
        since = datetime.fromtimestamp(since_wall, tz=UTC)
        if not CycleRecord.objects.filter(started_at__gte=since).exists():
            return False
        live_nodes = [node for name, nodes in context.fleet_nodes.items()
                      if context.supervisor.processes[name].alive and not context.supervisor.processes[name].held
                      for node in nodes]
        return not Node.objects.filter(name__in=live_nodes, status=Node.Status.OFFLINE).exists()
    except Exception:
        connection.close()
        return False
