"""Scheduling attempts (design §12): the latest attempt of every task and the attempt counts per code.

A cycle collects its attempts in an `AttemptBatch` and writes them in two statements at its end, whatever the
number of tasks: the per-task upsert would otherwise cost a round trip per attempt on the scheduler's hot path.
"""

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from scheduling.models import AttemptCodeCount, SchedulingAttempt, Task

# Filtered nodes whose reasons an attempt keeps one by one. Past this the summary line still counts every node by
# reason. Even as bare names, 5,000 nodes for each of 200 tasks a cycle are ~9 MB per cycle: measured at 5,000
# nodes, keeping 1,000 names cut the cycle rate by a fifth against keeping 200.
FILTERED_NODES_KEPT = 200

_ATTEMPTS = SchedulingAttempt._meta.db_table

# Attempts of tasks deleted meanwhile are dropped by the join rather than failing the whole batch.
# The batch travels as one JSON document: a single text parameter is far cheaper to send than arrays of JSON.
# A task that fails again the same way (a parked task retried after every activation) keeps its stored per-node
# entries: handing PostgreSQL the stored value back keeps its TOAST pointer, so only the small row with the new
# time is written instead of compressing and writing some 5 KB of JSON again.
_UPSERT_ATTEMPTS = f"""
INSERT INTO {_ATTEMPTS} (task_id, code, message, nodes, extra, at)
SELECT a.task_id, a.code, a.message, a.nodes, a.extra, %(now)s
  FROM jsonb_to_recordset(%(attempts)s::jsonb) AS a(task_id bigint, code text, message text, nodes jsonb,
                                                     extra jsonb)
  JOIN {Task._meta.db_table} t ON t.id = a.task_id
ORDER BY a.task_id
ON CONFLICT (task_id) DO UPDATE
   SET code = EXCLUDED.code, message = EXCLUDED.message,
       nodes = CASE WHEN {_ATTEMPTS}.nodes = EXCLUDED.nodes THEN {_ATTEMPTS}.nodes ELSE EXCLUDED.nodes END,
       extra = CASE WHEN {_ATTEMPTS}.extra = EXCLUDED.extra THEN {_ATTEMPTS}.extra ELSE EXCLUDED.extra END,
       at = EXCLUDED.at
"""

_COUNT_CODES = f"""
INSERT INTO {AttemptCodeCount._meta.db_table} (code, count)
SELECT c.code, c.count FROM unnest(%(codes)s::text[], %(counts)s::bigint[]) AS c(code, count) ORDER BY c.code
ON CONFLICT (code) DO UPDATE SET count = {AttemptCodeCount._meta.db_table}.count + EXCLUDED.count
"""


@dataclass
class _Attempt:
    code: str
    message: str
    nodes: dict[str, Any]
    extra: dict[str, Any]


@dataclass
class AttemptBatch:
    """Attempts gathered during a cycle; `flush` writes them all (a later attempt of a task replaces an earlier)."""

    attempts: dict[int, _Attempt] = field(default_factory=dict)
    code_counts: Counter = field(default_factory=Counter)

    def add(self, task_id: int, code: str, message: str, nodes: dict[str, Any] | None = None,
            extra: dict[str, Any] | None = None) -> None:
        """`nodes` in the stored form `attempt_nodes` builds (see SchedulingAttempt.nodes); None when no node
        was considered."""
        self.attempts[task_id] = _Attempt(code, message, nodes or {}, extra or {})
        self.code_counts[code] += 1

    def count(self, code: str) -> None:
        """Count an attempt whose details must not replace the task's latest attempt (a lost bind race)."""
        self.code_counts[code] += 1

    def flush(self, *, now=None) -> None:
        if not self.attempts and not self.code_counts:
            return
        task_ids = sorted(self.attempts)
        with transaction.atomic(), connection.cursor() as cursor:
            # A cycle's batch is megabytes of JSON: its commit need not wait for the WAL flush (a crash loses only
            # diagnostics the next cycle rewrites), and lz4, where the server has it, compresses several times faster.
            cursor.execute("SET LOCAL synchronous_commit TO off")
            if _server_has_lz4(cursor):
                cursor.execute("SET LOCAL default_toast_compression TO lz4")
            if task_ids:
                document = _dumps([
                    {"task_id": task_id, "code": attempt.code, "message": attempt.message, "nodes": attempt.nodes,
                     "extra": attempt.extra}
                    for task_id, attempt in ((task_id, self.attempts[task_id]) for task_id in task_ids)
                ])
                cursor.execute(_UPSERT_ATTEMPTS, {"now": now or timezone.now(), "attempts": document})
            if self.code_counts:
                codes = sorted(self.code_counts)
                cursor.execute(_COUNT_CODES, {"codes": codes, "counts": [self.code_counts[code] for code in codes]})
        self.attempts.clear()
        self.code_counts.clear()


_DJANGO_JSON = DjangoJSONEncoder()


def _dumps(value) -> str:
    """JSON as `json.dumps(value, cls=DjangoJSONEncoder)` writes it, several times faster (a cycle's batch is
    megabytes): datetimes and dataclasses go through Django's encoder so their form does not change."""
    return orjson.dumps(value, default=_DJANGO_JSON.default,
                        option=orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
                        | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_SERIALIZE_NUMPY).decode()


def attempt_nodes(result) -> tuple[dict[str, Any], dict[str, Any]]:
    """A schedule result's per-node diagnostics as an attempt stores them: the filtered nodes' names under their
    reasons (up to FILTERED_NODES_KEPT, then a count of those left out in `extra`) and the best feasible nodes'
    scores."""
    nodes = result.compact_diagnostics(filtered_limit=FILTERED_NODES_KEPT)
    left_out = result.filtered_count - FILTERED_NODES_KEPT
    return nodes, ({"filtered_nodes_not_listed": left_out} if left_out > 0 else {})


def _server_has_lz4(cursor) -> bool:
    """Builds without lz4 (the embedded PostgreSQL is one) accept only pglz; asked once per connection."""
    known = getattr(connection, "_heteroflow_lz4", None)
    if known is None:
        cursor.execute("SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'")
        row = cursor.fetchone()
        known = connection._heteroflow_lz4 = bool(row and row[0])
    return known


def attempt_counts() -> dict[str, int]:
    """Attempts per code since the cluster started, most frequent first."""
    return dict(AttemptCodeCount.objects.order_by("-count", "code").values_list("code", "count"))
