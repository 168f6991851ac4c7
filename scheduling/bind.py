"""Bind (SPEC §5): turn the framework's choice into a placement, against live data, all or nothing.

One transaction per task in three round trips (binding is the scheduler's hot path):

1. pipelined in one round trip: BEGIN, lock the node row (`SELECT … FOR UPDATE`) so binds on one node serialise,
   then read the live cards and the node's active placements — a statement after the lock sees every bind that
   committed before ours (READ COMMITTED takes a fresh snapshot per statement);
2. after the re-checks pass in Python (cards re-chosen if the snapshot's choice went stale), claim the task: the `pending → scheduled` compare-and-swap, the node's
   `gpu_used` ledger and the timeline row in ONE statement (`_claim`), with `task_transitioned` sent after commit
   exactly as `task_transition` does for every other arc;
3. COMMIT (asynchronous, see `_lock_and_read`).
A fractional task's shard is made from the same live read (`scheduling.shards.shard_on_card`): no extra query
when the caller passes the cycle's share groups (`tenancy`), one to read them otherwise.

Any refusal raises inside the transaction, so the task stays pending and no ledger moves. Losing the CAS means
another scheduler instance took the task: that is `BindConflict`, skipped silently by the cycle.
"""

import json
from dataclasses import dataclass, replace
from typing import Any

from django.db import connection, transaction
from django.utils import timezone
from psycopg.types.json import Jsonb

from nodes.models import GPU, Node
from scheduling import lifecycle, quotas
from scheduling.framework import reasons
from scheduling.framework.framework import select_cards
from scheduling.framework.snapshot import CardInfo, NodeInfo, SchedulerConfig, TaskInfo, TenancyView
from scheduling.groups.status import refresh_group_status
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, TaskEvent, TaskType
from scheduling.shards import ShardAllocationError, occupancy_of, shard_on_card
from scheduling.signals import task_transitioned
from tenants.models import Tenant

_AVAILABLE_NODE_STATES = (Node.Status.ONLINE.value, Node.Status.BUSY.value)
_ACTIVE = sorted(ACTIVE_STATES)

_LOCK_NODE = f"""
SELECT n.name, n.gpu_type, n.status, n.schedulable, n.dedicated_tenant_id, n.cpu_percent, n.memory_used_mb, n.memory_gb,
       n.gpu_total, n.gpu_used,
       (SELECT t.gpu_quota FROM {Tenant._meta.db_table} t WHERE t.id = %(tenant_id)s)
FROM {Node._meta.db_table} n WHERE n.id = %(node_id)s
FOR UPDATE OF n
"""

_LIVE_NODE = f"""
SELECT
  (SELECT coalesce(json_agg(json_build_array(g.index, g.memory_total_mb, g.memory_used_mb, g.utilization,
                                             g.temperature, g.type, g.model)), '[]'::json)
     FROM {GPU._meta.db_table} g WHERE g.node_id = %(node_id)s),
  (SELECT coalesce(json_agg(json_build_array(t.tenant_id, t.type, t.gpus, t.shard, t.port)), '[]'::json)
     FROM {Task._meta.db_table} t WHERE t.node_id = %(node_id)s AND t.status = ANY(%(active)s))
"""

_CLAIM = f"""
WITH claimed AS (
    UPDATE {Task._meta.db_table}
       SET status = %(to_status)s, status_changed_at = %(now)s, scheduled_at = %(now)s, reason = %(reason)s,
           node_id = %(node_id)s, gpus = %(gpus)s, port = %(port)s, shard = %(shard)s, env = env || %(env)s
     WHERE id = %(task_id)s AND status = %(from_status)s
 RETURNING id, tenant_id, gpu_required
), ledger AS (
    UPDATE {Node._meta.db_table} n SET gpu_used = n.gpu_used + claimed.gpu_required
      FROM claimed WHERE n.id = %(node_id)s AND claimed.gpu_required <> 0
), timeline AS (
    INSERT INTO {TaskEvent._meta.db_table} (task_id, from_status, to_status, reason, at)
    SELECT id, %(from_status)s, %(to_status)s, %(reason)s, %(now)s FROM claimed
)
SELECT tenant_id FROM claimed
"""


@dataclass(frozen=True)
class BindOutcome:
    code: str
    message: str
    cards: tuple[int, ...] = ()
    port: int | None = None
    shard: dict[str, Any] | None = None
    # The node itself is over a load threshold: no task may bind there until its next heartbeat says otherwise.
    node_overloaded: bool = False

    @property
    def bound(self) -> bool:
        return self.code == reasons.SCHEDULED

    @property
    def conflict(self) -> bool:
        return self.code == reasons.BIND_CONFLICT


class BindRefused(Exception):
    def __init__(self, code: str, message: str, *, node_overloaded: bool = False):
        super().__init__(message)
        self.code = code
        self.message = message
        self.node_overloaded = node_overloaded


@dataclass(frozen=True)
class _LiveNode:
    name: str
    gpu_type: str
    status: str
    schedulable: bool
    dedicated_tenant_id: int | None
    cpu_percent: float
    memory_used_mb: int
    memory_gb: int
    gpu_total: int
    gpu_used: int
    tenant_quota: int | None


def bind_task(task: TaskInfo, node: NodeInfo, cards: list[int], *, config: SchedulerConfig,
              tenancy: TenancyView | None = None) -> BindOutcome:
    """Place `task` on `node` (SPEC §5) or change nothing; the outcome's code says which.

    `cards` is the framework's choice over the snapshot. When live data shows one of them taken or over a card
    threshold (utilisation, temperature, memory), the cards are chosen again over the live cards that qualify,
    so a slightly stale snapshot costs nothing as long as the node still has room. `tenancy` (the cycle's share
    groups) lets a fractional task's new card choice consider shared cards; without it only empty cards qualify.
    """
    try:
        with transaction.atomic():
            live, card_rows, placements = _lock_and_read(task, node)
            if live is None:
                raise BindRefused(reasons.NO_SCHEDULABLE_NODES, f"node {node.name} no longer exists")
            _check_node(task, live, config)
            cards = _choose_cards(task, _live_node(node, live, card_rows, placements), cards, config, tenancy)
            _check_inference_limit(task, live, placements, config)
            port = _choose_port(task, live, placements, config)
            shard = _make_shard(task, live, card_rows, placements, cards, config, tenancy)
            if live.tenant_quota is not None:
                _check_quota(task)
            if not _claim(task, node.id, cards, port=port, shard=shard, reason=f"bound to {live.name}"):
                raise BindRefused(reasons.BIND_CONFLICT, "another scheduler instance bound the task first")
    except BindRefused as refused:
        return BindOutcome(code=refused.code, message=refused.message, node_overloaded=refused.node_overloaded)
    return BindOutcome(code=reasons.SCHEDULED, message=_bound_message(live.name, cards, port), cards=tuple(cards),
                       port=port, shard=shard)


def _lock_and_read(task: TaskInfo, node: NodeInfo) -> tuple[_LiveNode | None, list[list], list[list]]:
    """Steps 1 and 2 in one round trip: BEGIN, asynchronous commit, the node lock and the live read are pipelined.

    The live read still runs after the lock is granted, so it sees every bind committed before ours. Asynchronous
    commit: a bind's COMMIT does not wait for the WAL flush (the disk's fsync would otherwise be most of a bind's
    time). A database crash can forget the last fraction of a second of binds; their tasks are then pending again,
    consistently (claim, ledger and timeline are one transaction), and are scheduled anew.
    """
    raw = connection.connection
    with raw.pipeline():
        setting = raw.cursor()
        setting.execute("SET LOCAL synchronous_commit TO off")
        locked = raw.cursor()
        locked.execute(_LOCK_NODE, {"node_id": node.id, "tenant_id": task.tenant_id})
        read = raw.cursor()
        read.execute(_LIVE_NODE, {"node_id": node.id, "active": _ACTIVE})
    row = locked.fetchone()
    card_rows, placements = read.fetchone()
    return (_LiveNode(*row) if row else None), card_rows, placements


def _live_node(node: NodeInfo, live: _LiveNode, card_rows: list[list], placements: list[list]) -> NodeInfo:
    """The node as the database holds it now: cards with their reported figures and their active occupants."""
    cards = {
        index: CardInfo(index=index, memory_total_mb=total, memory_used_mb=used, utilization=utilization,
                        temperature=temperature)
        for index, total, used, utilization, temperature, _vendor, _model in card_rows
    }
    for tenant_id, _type, gpus, shard, _port in placements:
        if shard:
            card = cards.get(shard.get("card"))
            if card is not None:
                card.shard_tasks += 1
                card.shard_memory_mb += int(shard.get("memory_limit_mb") or 0)
                card.occupant_tenants.add(tenant_id)
            continue
        for index in gpus or ():
            card = cards.get(index)
            if card is not None:
                card.whole_card_tasks += 1
                card.occupant_tenants.add(tenant_id)
    return NodeInfo(id=node.id, name=live.name, gpu_type=live.gpu_type, gpu_total=live.gpu_total,
                    gpu_used=live.gpu_used, labels=node.labels,
                    cards=sorted(cards.values(), key=lambda card: card.index))


def _check_node(task: TaskInfo, live: _LiveNode, config: SchedulerConfig) -> None:
    recheck_node(name=live.name, status=live.status, schedulable=live.schedulable,
                 dedicated_tenant_id=live.dedicated_tenant_id, cpu_percent=live.cpu_percent,
                 memory_used_mb=live.memory_used_mb, memory_gb=live.memory_gb, gpu_total=live.gpu_total,
                 gpu_used=live.gpu_used, tenant_id=task.tenant_id, gpus_needed=task.gpu_required, config=config)


def recheck_node(*, name: str, status: str, schedulable: bool, dedicated_tenant_id: int | None, cpu_percent: float,
                 memory_used_mb: int, memory_gb: int, gpu_total: int, gpu_used: int, tenant_id: int,
                 gpus_needed: int, config: SchedulerConfig, needed_by: str = "the task") -> None:
    """SPEC §5.2's node re-checks against the row just locked (single binds and gang binds alike): available and
    not cordoned, not dedicated to another tenant, under the CPU and memory thresholds, room in the `gpu_used`
    ledger for `gpus_needed` cards. Raises BindRefused with the attempt code."""
    if status not in _AVAILABLE_NODE_STATES or not schedulable:
        raise BindRefused(reasons.NO_SCHEDULABLE_NODES, f"node {name} is {status}"
                          + ("" if schedulable else " and cordoned"))
    if dedicated_tenant_id is not None and dedicated_tenant_id != tenant_id:
        raise BindRefused(reasons.NO_SCHEDULABLE_NODES, f"node {name} is {reasons.DEDICATED_OTHER_TENANT}")
    if cpu_percent >= config.cpu_percent:
        raise BindRefused(reasons.LOAD_THRESHOLD_EXCEEDED,
                          f"node {name} CPU at {cpu_percent:g} % (threshold {config.cpu_percent:g} %)",
                          node_overloaded=True)
    if memory_gb:
        memory_percent = 100.0 * memory_used_mb / (memory_gb * 1024)
        if memory_percent >= config.memory_percent:
            raise BindRefused(reasons.LOAD_THRESHOLD_EXCEEDED,
                              f"node {name} memory at {memory_percent:.1f} % "
                              f"(threshold {config.memory_percent:g} %)", node_overloaded=True)
    if gpus_needed and gpu_used + gpus_needed > gpu_total:
        raise BindRefused(reasons.INSUFFICIENT_RESOURCES,
                          f"node {name} has {max(gpu_total - gpu_used, 0)} free cards, {needed_by} needs {gpus_needed}")


def _choose_cards(task: TaskInfo, live_node: NodeInfo, preferred: list[int], config: SchedulerConfig,
                  tenancy: TenancyView | None) -> list[int]:
    """The preferred cards if they all still qualify on live data, else a new choice over the qualifying cards."""
    wanted = task.gpu_required or (1 if task.is_fractional else 0)
    if not wanted:
        return []
    cool = [card for card in live_node.cards if card_under_thresholds(card, config)]
    by_index = {card.index: card for card in cool}
    if len(set(preferred)) == wanted and all(
        index in by_index and _card_takes(task, by_index[index], config) for index in preferred
    ):
        return sorted(set(preferred))
    chosen = select_cards(task, replace(live_node, cards=cool), config, tenancy=tenancy)
    if len(chosen) == wanted:
        return chosen
    if sum(1 for card in live_node.cards if _card_takes(task, card, config)) >= wanted:
        hot = "; ".join(_card_load(card, config) for card in live_node.cards if card.index not in by_index)
        raise BindRefused(reasons.LOAD_THRESHOLD_EXCEEDED, f"node {live_node.name}: {hot}")
    raise BindRefused(reasons.INSUFFICIENT_RESOURCES,
                      f"node {live_node.name} no longer has {wanted} card{'s' if wanted > 1 else ''} for the task")


def _card_takes(task: TaskInfo, card: CardInfo, config: SchedulerConfig) -> bool:
    """Whether the card can still take the task (a shard's memory, compute and tenants are allocate_shard's)."""
    if task.is_fractional:
        return card.whole_card_tasks == 0
    return card.is_free and (not task.gpu_memory_mb or config.card_free_mb(card) >= task.gpu_memory_mb)


def card_under_thresholds(card: CardInfo, config: SchedulerConfig) -> bool:
    """The card-level load re-check of SPEC §5.2 (memory utilisation, utilisation, temperature)."""
    return (not config.card_overloaded(card) and card.utilization < config.gpu_utilization_percent
            and card.temperature < config.gpu_temperature_threshold)


def _card_load(card: CardInfo, config: SchedulerConfig) -> str:
    return (f"card {card.index} at {card.memory_utilization_percent:.1f} % memory "
            f"(threshold {config.gpu_memory_percent:g} %), {card.utilization:g} % utilisation "
            f"(threshold {config.gpu_utilization_percent:g} %), {card.temperature:g} °C "
            f"(threshold {config.gpu_temperature_threshold:g} °C)")


def _check_inference_limit(task: TaskInfo, live: _LiveNode, placements: list[list], config: SchedulerConfig) -> None:
    if task.type != TaskType.INFERENCE:
        return
    inference = sum(1 for placement in placements if placement[1] == TaskType.INFERENCE)
    if inference >= config.inference_max_per_node:
        raise BindRefused(reasons.INSUFFICIENT_RESOURCES,
                          f"node {live.name} already runs {inference} inference containers")


def _choose_port(task: TaskInfo, live: _LiveNode, placements: list[list], config: SchedulerConfig) -> int | None:
    """The lowest host port of the range that no active task on the node holds (inference only)."""
    if task.type != TaskType.INFERENCE:
        return None
    taken = {placement[4] for placement in placements if placement[4] is not None}
    for port in range(config.port_range_start, config.port_range_end + 1):
        if port not in taken:
            return port
    raise BindRefused(reasons.PORTS_EXHAUSTED,
                      f"node {live.name} has no free port in {config.port_range_start}–{config.port_range_end}")


def _make_shard(task: TaskInfo, live: _LiveNode, card_rows: list[list], placements: list[list], cards: list[int],
                config: SchedulerConfig, tenancy: TenancyView | None) -> dict[str, Any] | None:
    """The shard over the card and placements read under the node lock (what `allocate_shard` would read)."""
    if not task.is_fractional:
        return None
    card = next((row for row in card_rows if row[0] == cards[0]), None)
    if card is None:
        raise BindRefused(reasons.SHARD_ALLOCATION_FAILED, f"card {cards[0]} is not on node {live.name}")
    index, memory_total_mb, memory_used_mb, _utilization, _temperature, vendor, model = card
    held = occupancy_of((tenant_id, gpus, shard) for tenant_id, _type, gpus, shard, _port in placements).get(index)
    try:
        return shard_on_card(task=task, card_index=index, vendor=vendor or live.gpu_type, model=model,
                             memory_total_mb=memory_total_mb, memory_used_mb=memory_used_mb, held=held,
                             tenancy=tenancy, config=config)
    except ShardAllocationError as error:
        raise BindRefused(reasons.SHARD_ALLOCATION_FAILED, str(error)) from error


def _check_quota(task: TaskInfo) -> None:
    try:
        quotas.lock_and_check_quota(task_id=task.id, tenant_id=task.tenant_id, gpu_required=task.gpu_required)
    except quotas.QuotaExceededError as error:
        raise BindRefused(reasons.QUOTA_EXCEEDED, str(error)) from error


def _claim(task: TaskInfo, node_id: int, cards: list[int], *, port: int | None, shard: dict[str, Any] | None,
           reason: str) -> bool:
    """The `pending → scheduled` arc of `task_transition`, in one statement; True if this call won the CAS."""
    lifecycle.check_transition(lifecycle.PENDING, lifecycle.SCHEDULED)
    params = {
        "task_id": task.id,
        "from_status": lifecycle.PENDING,
        "to_status": lifecycle.SCHEDULED,
        "now": timezone.now(),
        "reason": reason,
        "node_id": node_id,
        "gpus": Jsonb(list(cards)),
        "port": port,
        "shard": Jsonb(shard) if shard else None,
        "env": Jsonb(shard.get("env", {}) if shard else {}),
    }
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM, params)
        row = cursor.fetchone()
    if row is None:
        return False
    if task.group_id is not None:
        refresh_group_status(task.group_id)
    tenant_id = row[0]
    transaction.on_commit(
        lambda: task_transitioned.send(
            sender=Task,
            task_id=task.id,
            tenant_id=tenant_id,
            from_status=lifecycle.PENDING,
            to_status=lifecycle.SCHEDULED,
            reason=reason,
        )
    )
    return True


def _bound_message(node_name: str, cards: list[int], port: int | None) -> str:
    message = f"bound to {node_name}"
    if cards:
        message += f" (cards {', '.join(map(str, cards))})"
    if port is not None:
        message += f", port {port}"
    return message


# --- many binds in one transaction ------------------------------------------------------------------------------

_LOCK_NODES = f"""
SELECT n.id, n.name, n.gpu_type, n.status, n.schedulable, n.dedicated_tenant_id, n.cpu_percent, n.memory_used_mb,
       n.memory_gb, n.gpu_total, n.gpu_used, NULL
FROM {Node._meta.db_table} n WHERE n.id = ANY(%(node_ids)s)
ORDER BY n.id
FOR UPDATE OF n
"""

# After the node locks (nodes before tenants, each in id order: the order single and gang binds take them too).
_LOCK_QUOTA_TENANTS = f"""
SELECT t.id, t.gpu_quota FROM {Tenant._meta.db_table} t
 WHERE t.id = ANY(%(tenant_ids)s) AND t.gpu_quota IS NOT NULL
 ORDER BY t.id
 FOR UPDATE OF t
"""

_LIVE_NODES = f"""
SELECT 'cards', g.node_id, json_agg(json_build_array(g.index, g.memory_total_mb, g.memory_used_mb, g.utilization,
                                                   g.temperature, g.type, g.model))
  FROM {GPU._meta.db_table} g WHERE g.node_id = ANY(%(node_ids)s) GROUP BY g.node_id
UNION ALL
SELECT 'placements', t.node_id, json_agg(json_build_array(t.tenant_id, t.type, t.gpus, t.shard, t.port))
  FROM {Task._meta.db_table} t WHERE t.node_id = ANY(%(node_ids)s) AND t.status = ANY(%(active)s) GROUP BY t.node_id
"""

_QUOTA_USAGE = f"""
SELECT t.tenant_id, coalesce(sum(t.gpu_required), 0) FROM {Task._meta.db_table} t
 WHERE t.tenant_id IN (SELECT q.id FROM {Tenant._meta.db_table} q
                        WHERE q.id = ANY(%(tenant_ids)s) AND q.gpu_quota IS NOT NULL)
   AND t.status = ANY(%(active)s)
 GROUP BY t.tenant_id
"""

_CLAIM_MANY = f"""
WITH batch AS (
    SELECT * FROM unnest(%(task_ids)s::bigint[], %(node_ids)s::bigint[], %(gpus)s::text[], %(ports)s::integer[],
                         %(shards)s::text[], %(envs)s::text[], %(reasons)s::text[])
             AS b(task_id, node_id, gpus, port, shard, env, reason)
), locked AS (
    -- Task rows locked in id order: two batches claiming overlapping tasks on different nodes cannot deadlock.
    SELECT id FROM {Task._meta.db_table}
     WHERE id = ANY(%(task_ids)s::bigint[]) AND status = %(from_status)s
     ORDER BY id
       FOR UPDATE
), claimed AS (
    UPDATE {Task._meta.db_table} t
       SET status = %(to_status)s, status_changed_at = %(now)s, scheduled_at = %(now)s, reason = b.reason,
           node_id = b.node_id, gpus = b.gpus::jsonb, port = b.port, shard = b.shard::jsonb,
           env = t.env || b.env::jsonb
      FROM batch b JOIN locked l ON l.id = b.task_id
     WHERE t.id = b.task_id AND t.status = %(from_status)s
 RETURNING t.id, t.tenant_id, t.gpu_required, t.node_id, t.reason
), ledger AS (
    UPDATE {Node._meta.db_table} n SET gpu_used = n.gpu_used + used.gpus
      FROM (SELECT node_id, sum(gpu_required) AS gpus FROM claimed GROUP BY node_id) used
     WHERE n.id = used.node_id AND used.gpus <> 0
), timeline AS (
    INSERT INTO {TaskEvent._meta.db_table} (task_id, from_status, to_status, reason, at)
    SELECT id, %(from_status)s, %(to_status)s, reason, %(now)s FROM claimed
)
SELECT id, tenant_id, reason FROM claimed
"""


@dataclass(frozen=True)
class Placement:
    """One decision of the cycle for `bind_batch`: `task` on `node`, on the framework's `cards`."""

    task: TaskInfo
    node: NodeInfo
    cards: list[int]


@dataclass
class _Claim:
    task: TaskInfo
    node_id: int
    cards: list[int]
    port: int | None
    shard: dict[str, Any] | None
    reason: str


def bind_batch(placements: list[Placement], *, config: SchedulerConfig,
               tenancy: TenancyView | None = None) -> list[BindOutcome]:
    """`bind_task` for many placements in ONE transaction of three round trips; one outcome per placement.

    1. pipelined: BEGIN, lock every node involved (id order), then the involved tenants that have a GPU quota (id
       order), then read the live cards, the active placements and the tenants' quota usage;
    2. every placement is re-checked in order exactly as `bind_task` does, against the live rows plus the
       placements of this batch accepted before it; one that fails is left out with its refusal (its task stays
       pending) and the rest go on; all accepted placements are claimed by ONE statement (`_CLAIM_MANY`: per-row
       `pending → scheduled` compare-and-swap, the per-node ledger sum and the timeline rows), `task_transitioned`
       sent after commit for each task won; a task lost to another instance is a `BindConflict`;
    3. COMMIT (asynchronous, as for single binds).
    """
    if not placements:
        return []
    node_ids = sorted({placement.node.id for placement in placements})
    tenant_ids = sorted({placement.task.tenant_id for placement in placements})
    outcomes: list[BindOutcome | None] = [None] * len(placements)
    accepted: list[tuple[int, _Claim]] = []
    with transaction.atomic():
        lives, card_rows, placements_on, quotas_of, quota_used = _lock_and_read_many(node_ids, tenant_ids)
        for position, placement in enumerate(placements):
            task, node = placement.task, placement.node
            try:
                live = lives.get(node.id)
                if live is None:
                    raise BindRefused(reasons.NO_SCHEDULABLE_NODES, f"node {node.name} no longer exists")
                cards_here, held = card_rows.get(node.id, []), placements_on.setdefault(node.id, [])
                _check_node(task, live, config)
                cards = _choose_cards(task, _live_node(node, live, cards_here, held), placement.cards, config,
                                      tenancy)
                _check_inference_limit(task, live, held, config)
                port = _choose_port(task, live, held, config)
                shard = _make_shard(task, live, cards_here, held, cards, config, tenancy)
                quota = quotas_of.get(task.tenant_id)
                if quota is not None and task.gpu_required:
                    used = quota_used.get(task.tenant_id, 0)
                    if used + task.gpu_required > quota:
                        raise BindRefused(reasons.QUOTA_EXCEEDED,
                                          quotas.quota_message(used=used, quota=quota, asked=task.gpu_required))
            except BindRefused as refused:
                outcomes[position] = BindOutcome(code=refused.code, message=refused.message,
                                                 node_overloaded=refused.node_overloaded)
                continue
            # The later placements of the batch are checked against this one as if it had committed.
            lives[node.id] = replace(live, gpu_used=live.gpu_used + task.gpu_required)
            held.append([task.tenant_id, task.type, list(cards), shard, port])
            quota_used[task.tenant_id] = quota_used.get(task.tenant_id, 0) + task.gpu_required
            accepted.append((position, _Claim(task, node.id, cards, port, shard, f"bound to {live.name}")))
        won = _claim_many([claim for _, claim in accepted])
    for position, claim in accepted:
        if claim.task.id in won:
            outcomes[position] = BindOutcome(code=reasons.SCHEDULED,
                                             message=_bound_message(lives[claim.node_id].name, claim.cards,
                                                                    claim.port),
                                             cards=tuple(claim.cards), port=claim.port, shard=claim.shard)
        else:
            outcomes[position] = BindOutcome(code=reasons.BIND_CONFLICT,
                                             message="another scheduler instance bound the task first")
    return outcomes


def _lock_and_read_many(node_ids: list[int], tenant_ids: list[int]):
    """Step 1 of `bind_batch` in one round trip (asynchronous commit: see `_lock_and_read`)."""
    raw = connection.connection
    with raw.pipeline():
        setting = raw.cursor()
        setting.execute("SET LOCAL synchronous_commit TO off")
        locked = raw.cursor()
        locked.execute(_LOCK_NODES, {"node_ids": node_ids})
        tenants = raw.cursor()
        tenants.execute(_LOCK_QUOTA_TENANTS, {"tenant_ids": tenant_ids})
        read = raw.cursor()
        read.execute(_LIVE_NODES, {"node_ids": node_ids, "active": _ACTIVE})
        usage = raw.cursor()
        usage.execute(_QUOTA_USAGE, {"tenant_ids": tenant_ids, "active": _ACTIVE})
    lives = {row[0]: _LiveNode(*row[1:]) for row in locked.fetchall()}
    quotas_of = dict(tenants.fetchall())
    card_rows: dict[int, list[list]] = {}
    placements_on: dict[int, list[list]] = {}
    for kind, node_id, rows in read.fetchall():
        (card_rows if kind == "cards" else placements_on)[node_id] = rows
    quota_used = {tenant_id: int(used) for tenant_id, used in usage.fetchall()}
    return lives, card_rows, placements_on, quotas_of, quota_used


def _claim_many(claims: list[_Claim]) -> set[int]:
    """The `pending → scheduled` arc of `task_transition` for every claim, in one statement; the ids won."""
    if not claims:
        return set()
    lifecycle.check_transition(lifecycle.PENDING, lifecycle.SCHEDULED)
    params = {
        "from_status": lifecycle.PENDING,
        "to_status": lifecycle.SCHEDULED,
        "now": timezone.now(),
        "task_ids": [claim.task.id for claim in claims],
        "node_ids": [claim.node_id for claim in claims],
        "gpus": [json.dumps(list(claim.cards)) for claim in claims],
        "ports": [claim.port for claim in claims],
        "shards": [json.dumps(claim.shard) if claim.shard else None for claim in claims],
        "envs": [json.dumps(claim.shard.get("env", {}) if claim.shard else {}) for claim in claims],
        "reasons": [claim.reason for claim in claims],
    }
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_MANY, params)
        rows = cursor.fetchall()
    won = {row[0] for row in rows}
    for group_id in sorted({claim.task.group_id for claim in claims
                            if claim.task.group_id is not None and claim.task.id in won}):
        refresh_group_status(group_id)
    for task_id, tenant_id, reason in rows:
        transaction.on_commit(
            lambda task_id=task_id, tenant_id=tenant_id, reason=reason: task_transitioned.send(
                sender=Task,
                task_id=task_id,
                tenant_id=tenant_id,
                from_status=lifecycle.PENDING,
                to_status=lifecycle.SCHEDULED,
                reason=reason,
            )
        )
    return won
