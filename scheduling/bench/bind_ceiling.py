"""What this machine's PostgreSQL can commit, one bind at a time: the reference the scheduler benchmarks divide by.

`measure_bind_ceiling` commits bind-shaped transactions on one connection: the bind's own claim statement
(`scheduling.bind.claim.CLAIM`: the `pending → scheduled` compare-and-swap on a task row, the `gpu_used += 1` ledger
on a node row and one timeline row) for one task, with `synchronous_commit off` as the scheduler's binds do, each
transaction sent in one round trip. Tasks bound per
second by the scheduler divided by this ceiling (`ratio=`) compares figures taken on different machines, or on one
machine under different load. It works on the real tables of the current database (same indexes, same triggers),
on rows of its own that it deletes afterwards; nothing else may be scheduling in that database meanwhile.

`reference_ceiling` runs the issues' own reference (`reference_ceiling.py` beside this module, a verbatim copy: a
simpler bind on tables of its own) as they run it, in a process of its own: the ceiling their ratios divide by.
"""

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from django.db import connection

from nodes.models import Node
from scheduling.bind.claim import CLAIM, Claim, claim_params
from scheduling.framework.snapshot import TaskInfo
from scheduling.models import Task
from tenants.models import Tenant

FIXTURE_NAME = "bind-ceiling"
REFERENCE_TOOL = Path(__file__).with_name("reference_ceiling.py")
REFERENCE_TRANSACTIONS = 3000
# Transactions committed before the clock starts (connection, plan cache and buffers warm up).
WARM_UP = 50

@dataclass(frozen=True)
class BindCeiling:
    transactions: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.transactions / self.seconds if self.seconds else 0.0


def measure_bind_ceiling(*, transactions: int = 3000, seconds: float = 3.0, nodes: int = 16) -> BindCeiling:
    """Commit up to `transactions` binds (after WARM_UP more), stopping after `seconds`; rows removed after."""
    task_ids, node_ids = _create_fixture(tasks=transactions + WARM_UP, nodes=nodes)
    try:
        raw = connection.connection
        with raw.cursor() as cursor:
            for position in range(WARM_UP):
                commit_bind(cursor, task_id=task_ids[position], node_id=node_ids[position % nodes])
            committed, started = 0, time.perf_counter()
            deadline = started + seconds
            for position in range(WARM_UP, len(task_ids)):
                commit_bind(cursor, task_id=task_ids[position], node_id=node_ids[position % nodes])
                committed += 1
                if time.perf_counter() >= deadline:
                    break
            return BindCeiling(transactions=committed, seconds=time.perf_counter() - started)
    finally:
        _remove_fixture()


def reference_ceiling(database_url: str) -> float:
    """Binds a second by the issues' reference tool on the database at `database_url`."""
    finished = subprocess.run([sys.executable, str(REFERENCE_TOOL), str(REFERENCE_TRANSACTIONS)], capture_output=True,
                              text=True, env={**os.environ, "DATABASE_URL": database_url}, timeout=600, check=True)
    return float(re.search(r"^bind_ceiling_per_s=([\d.]+)$", finished.stdout, re.MULTILINE).group(1))


def commit_bind(cursor, *, task_id: int, node_id: int) -> bool:
    """One bind-shaped transaction in one round trip (BEGIN … COMMIT pipelined); True if the CAS won.

    `cursor` is a cursor of the raw psycopg connection, in autocommit mode (Django's is, outside atomic blocks).
    """
    connection_ = cursor.connection
    params = claim_params([Claim(TaskInfo(id=task_id, tenant_id=0), node_id, [0], None, None,
                                 "bound (bind ceiling)")])
    with connection_.pipeline():
        cursor.execute("BEGIN")
        cursor.execute("SET LOCAL synchronous_commit TO off")
        claim = connection_.cursor()
        claim.execute(CLAIM, params)
        cursor.execute("COMMIT")
    return len(claim.fetchall()) == 1


def _create_fixture(*, tasks: int, nodes: int) -> tuple[list[int], list[int]]:
    # Offline and cordoned: a scheduler cycle never chooses these nodes (their tasks are not pending long either).
    connection.ensure_connection()
    tenant = Tenant.objects.create(name=FIXTURE_NAME)
    made = Node.objects.bulk_create(
        Node(name=f"{FIXTURE_NAME}-{index}", status=Node.Status.OFFLINE, schedulable=False, gpu_type="nvidia",
             gpu_total=0)
        for index in range(nodes)
    )
    queued = Task.objects.bulk_create(
        (Task(tenant=tenant, name=f"{FIXTURE_NAME}-{index}", gpu_required=1) for index in range(tasks)),
        batch_size=5000,
    )
    return [task.id for task in queued], [node.id for node in made]


def _remove_fixture() -> None:
    # Tasks and their timeline go with the tenant (cascade); the nodes are deleted by name.
    Tenant.objects.filter(name=FIXTURE_NAME).delete()
    Node.objects.filter(name__startswith=f"{FIXTURE_NAME}-").delete()
