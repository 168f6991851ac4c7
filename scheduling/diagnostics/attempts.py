"""Scheduling attempts (design §12): the latest attempt of every task and the attempt counts per code.

A cycle collects its attempts in an `AttemptBatch` and writes them in two statements at its end, whatever the
number of tasks: the per-task upsert would otherwise cost a round trip per attempt on the scheduler's hot path.

A scheduler running cycles back to back writes them behind (`flush(behind=True)`): the batch's statements run on
a session of their own (`attempts_writer`, one thread) while the next cycle starts, so PostgreSQL's work on them —
parsing, compressing and logging a megabyte of JSON a cycle at a few thousand nodes — overlaps the scheduler's
deciding instead of adding to it. At most one batch is in flight: the next waits for it, so attempts land in cycle
order, and an attempt never replaces a later one of the same task (an instance that wrote behind may finish after
the next instance's cycle): the upsert keeps the row whose `at` is later.
"""

import logging
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from scheduling.models import AttemptCodeCount, SchedulingAttempt, Task

logger = logging.getLogger(__name__)
T = TypeVar("T")

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
 WHERE {_ATTEMPTS}.at <= EXCLUDED.at
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

    def flush(self, *, now=None, behind: bool = False) -> None:
        """Write the batch and empty it. `behind`: hand the statements to `attempts_writer` and return at once —
        unless this session is inside a transaction (a caller's, a test's), whose rows another session would not
        see."""
        if not self.attempts and not self.code_counts:
            return
        task_ids = sorted(self.attempts)
        document = _dumps([
            {"task_id": task_id, "code": attempt.code, "message": attempt.message, "nodes": attempt.nodes,
             "extra": attempt.extra}
            for task_id, attempt in ((task_id, self.attempts[task_id]) for task_id in task_ids)
        ]) if task_ids else None
        codes = sorted(self.code_counts)
        counts = [self.code_counts[code] for code in codes]
        now = now or timezone.now()
        self.attempts.clear()
        self.code_counts.clear()
        if behind and not connection.in_atomic_block:
            attempts_writer.submit(document, codes, counts, now)
        else:
            _write(document, codes, counts, now)


def _write(document: str | None, codes: list[str], counts: list[int], now) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        # A cycle's batch is megabytes of JSON: its commit need not wait for the WAL flush (a crash loses only
        # diagnostics the next cycle rewrites), and lz4, where the server has it, compresses several times faster.
        cursor.execute("SET LOCAL synchronous_commit TO off")
        if _server_has_lz4(cursor):
            cursor.execute("SET LOCAL default_toast_compression TO lz4")
        if document is not None:
            cursor.execute(_UPSERT_ATTEMPTS, {"now": now, "attempts": document})
        if codes:
            cursor.execute(_COUNT_CODES, {"codes": codes, "counts": counts})


class AttemptsWriter:
    """Writes attempt batches on a thread and database session of its own, one batch at a time (module
    docstring). A process that ends without `wait` may lose the batch in flight: diagnostics the tasks' next
    attempts write again."""

    def __init__(self) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._last: Future | None = None

    def submit(self, document: str | None, codes: list[str], counts: list[int], now) -> None:
        self.wait()
        self._last = self._thread().submit(self._write_logged, document, codes, counts, now)

    def wait(self) -> None:
        """Until the batch in flight, if any, is written (or failed: the failure is logged)."""
        last, self._last = self._last, None
        if last is not None:
            last.result()

    def call(self, function: Callable[[], T]) -> T:
        """`function()` on the writer's thread, once the batch in flight is written: what it does with `connection`
        it does with the writer's session (the benchmark counts its statements and its backend's CPU)."""
        self.wait()
        return self._thread().submit(function).result()

    def close(self) -> None:
        """Wait for the batch in flight, then end the writer's session and thread (a new batch starts them again)."""
        self.wait()
        if self._executor is not None:
            # Looked up on the writer's thread: `connection` is each thread's own session.
            self._executor.submit(lambda: connection.close()).result()
            self._executor.shutdown()
            self._executor = None

    def _thread(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attempts-writer")
        return self._executor

    @staticmethod
    def _write_logged(document: str | None, codes: list[str], counts: list[int], now) -> None:
        # The session is kept from batch to batch (whatever CONN_MAX_AGE says of request sessions) and dropped
        # after a failure; the next batch opens a new one.
        try:
            _write(document, codes, counts, now)
        except Exception:
            # Diagnostics only: the tasks' next attempts are written again; a broken session is not kept.
            logger.exception("writing a batch of scheduling attempts failed")
            connection.close()


attempts_writer = AttemptsWriter()


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
