"""The claim of bind: the `pending → scheduled` arc of `task_transition` for many tasks in ONE statement.

Per row a compare-and-swap (the task must still be pending), the node's `gpu_used` ledger summed per node and the
timeline row. These three are SQL here, not `task_transition`'s ORM calls, because a batch of hundreds of binds
must cost one round trip (`bench_scheduler`); what follows the won arcs — the groups' status, `task_transitioned`
after commit — is `task_transition`'s own piece (`after_arcs_won`). The bind-ceiling benchmark runs this same
statement (`CLAIM`, `claim_params`).
"""

import json
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.utils import timezone

from nodes.models import Node
from scheduling import lifecycle
from scheduling.framework.snapshot import TaskInfo
from scheduling.models import Task, TaskEvent
from scheduling.services.task_transition import WonArc, after_arcs_won

CLAIM = f"""
WITH batch AS (
    SELECT * FROM unnest(%(task_ids)s::bigint[], %(node_ids)s::bigint[], %(gpus)s::text[], %(ports)s::integer[],
                         %(shards)s::text[], %(envs)s::text[], %(reasons)s::text[], %(ranks)s::integer[],
                         %(card_types)s::text[], %(borrowed)s::boolean[])
             AS b(task_id, node_id, gpus, port, shard, env, reason, rank, card_type, borrowed)
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
           env = t.env || b.env::jsonb, rank = coalesce(b.rank, t.rank), card_type = b.card_type,
           borrowed = b.borrowed,
           queue_backoff = 0, parked_until = NULL, nominated_node_id = NULL
      FROM batch b JOIN locked l ON l.id = b.task_id
     WHERE t.id = b.task_id AND t.status = %(from_status)s
 RETURNING t.id, t.tenant_id, t.gpu_required, t.node_id, t.reason, t.group_id
), ledger AS (
    UPDATE {Node._meta.db_table} n SET gpu_used = n.gpu_used + used.gpus
      FROM (SELECT node_id, sum(gpu_required) AS gpus FROM claimed GROUP BY node_id) used
     WHERE n.id = used.node_id AND used.gpus <> 0
), timeline AS (
    INSERT INTO {TaskEvent._meta.db_table} (task_id, from_status, to_status, reason, at)
    SELECT id, %(from_status)s, %(to_status)s, reason, %(now)s FROM claimed
)
SELECT id, tenant_id, group_id, reason, pg_current_xact_id()::text::bigint FROM claimed
"""


@dataclass
class Claim:
    """One accepted placement, as the claim writes it."""

    task: TaskInfo
    node_id: int
    cards: list[int]
    port: int | None
    shard: dict[str, Any] | None
    reason: str
    env: dict[str, str] = field(default_factory=dict)
    rank: int | None = None
    card_type: str = ""
    # Admitted by borrowing the cohort's quota (design §16.2).
    borrowed: bool = False


@dataclass(frozen=True)
class Claimed:
    """The tasks a claim won (the others were no longer pending), and its transaction (the id the node change log
    records it by), None when it won none."""

    task_ids: frozenset[int]
    transaction: int | None


def claim(claims: list[Claim]) -> Claimed:
    """Claim every placement in one statement."""
    if not claims:
        return Claimed(frozenset(), None)
    with connection.cursor() as cursor:
        cursor.execute(CLAIM, claim_params(claims))
        rows = cursor.fetchall()
    won = [WonArc(*row[:4]) for row in rows]
    after_arcs_won(won, from_status=lifecycle.PENDING, to_status=lifecycle.SCHEDULED)
    return Claimed(frozenset(arc.task_id for arc in won), rows[0][4] if rows else None)


def claim_params(claims: list[Claim]) -> dict[str, Any]:
    """The parameters of `CLAIM` for these placements."""
    lifecycle.check_transition(lifecycle.PENDING, lifecycle.SCHEDULED)
    return {
        "from_status": lifecycle.PENDING,
        "to_status": lifecycle.SCHEDULED,
        "now": timezone.now(),
        "task_ids": [item.task.id for item in claims],
        "node_ids": [item.node_id for item in claims],
        "gpus": [json.dumps(list(item.cards)) for item in claims],
        "ports": [item.port for item in claims],
        "shards": [json.dumps(item.shard) if item.shard else None for item in claims],
        "envs": [json.dumps({**item.env, **(item.shard.get("env", {}) if item.shard else {})}) for item in claims],
        "reasons": [item.reason for item in claims],
        "ranks": [item.rank for item in claims],
        "card_types": [item.card_type for item in claims],
        "borrowed": [item.borrowed for item in claims],
    }
