"""Several scheduler PROCESSES running cycles at once over one queue (design §4: correctness rests on the CAS)."""

import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.db import connection
from django.db.models import Count

from nodes.models import Node
from scheduling import lifecycle
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task, TaskEvent
from tests.factories import make_node

INSTANCES = 3
PENDING = 1000

# Each worker is its own interpreter with its own connections, writing its attempts behind as a scheduler does:
# cycles until two in a row bind nothing.
WORKER = """
import os, random, django
django.setup()
from scheduling.cycle.run import run_cycle
idle = cycles = 0
while idle < 2 and cycles < 15:
    result = run_cycle(instance=os.environ["WORKER_NAME"], rng=random.Random(os.getpid()), attempts_behind=True)
    cycles += 1
    idle = idle + 1 if result.bound == 0 else 0
"""


def _database_url() -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit(parts._replace(path=f"/{connection.settings_dict['NAME']}"))


@pytest.mark.django_db(transaction=True)
def test_concurrent_scheduler_processes_never_bind_a_task_twice_nor_overfill_a_node(tenant):
    for index in range(30):
        make_node(name=f"n{index:02d}", cards=(8 if index % 3 else 4))
    shapes = [1, 1, 1, 2, 2, 4]
    Task.objects.bulk_create(
        Task(tenant=tenant, name=f"t{index}", gpu_required=shapes[index % len(shapes)], priority=index % 100)
        for index in range(PENDING)
    )
    # Cycles at once, not in turns (scheduling.cycle.turns): the compare-and-swap alone must keep them correct.
    env = {**os.environ, "DATABASE_URL": _database_url(), "DJANGO_SETTINGS_MODULE": "heteroflow_site.settings",
           "PYTHONPATH": str(settings.BASE_DIR), "HETEROFLOW_CONCURRENT_CYCLES": "true"}

    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER], env={**env, "WORKER_NAME": f"w{index}"},
                         cwd=Path(settings.BASE_DIR), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for index in range(INSTANCES)
    ]
    failures = [worker.communicate(timeout=300)[1].decode()[-2000:] for worker in workers]
    assert [worker.returncode for worker in workers] == [0] * INSTANCES, failures

    claims = TaskEvent.objects.filter(from_status=lifecycle.PENDING, to_status=lifecycle.SCHEDULED)
    assert not claims.values("task_id").annotate(times=Count("id")).filter(times__gt=1).exists()
    active = list(Task.objects.filter(status__in=ACTIVE_STATES).values("node_id", "gpu_required", "gpus"))
    assert len(active) == claims.count() > 0
    held = defaultdict(int)
    cards = defaultdict(list)
    for task in active:
        held[task["node_id"]] += task["gpu_required"]
        cards[task["node_id"]].extend(task["gpus"])
    for node in Node.objects.all():
        assert held[node.id] <= node.gpu_total, node.name
        assert node.gpu_used == held[node.id], node.name
        assert len(cards[node.id]) == len(set(cards[node.id])), f"a card of {node.name} is bound twice"
    # Demand (1,667 cards) exceeds the 200 cards: the cluster ends full, so the instances really competed.
    assert sum(held.values()) >= 190
