"""API latency under load, in a throwaway database: a real ASGI server (Daphne, as in production), a scheduler
running cycles, and N client threads submitting tasks and listing them over HTTP.

Prints `bind_ceiling_per_s` (measured in the same run, before the load), then per request kind the count, p50, p99,
max latency in milliseconds and the errors (non-2xx answers and failed connections), and the cycles that ran while
the clients did. Bounded: each client stops after --requests requests or --seconds, whichever comes first.
"""

import secrets
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import requests
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from scheduling.bench.bind_ceiling import measure_bind_ceiling
from scheduling.bench.database import database_url, throwaway_database
from scheduling.bench.figures import percentile
from scheduling.bench.network import free_port

SUBMIT, LIST = "submit", "list"
SERVER_START_SECONDS = 60
# A request slower than this is counted as an error (and the client goes on).
REQUEST_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class Sample:
    kind: str
    milliseconds: float
    ok: bool


class Command(BaseCommand):
    help = "Benchmark API latency (submit, list) with N client threads against Daphne while scheduling cycles run."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=300)
        parser.add_argument("--pending", type=int, default=2000, help="pending tasks seeded before the load")
        parser.add_argument("--clients", type=int, default=8)
        parser.add_argument("--requests", type=int, default=200, help="requests per client (submit, list alternate)")
        parser.add_argument("--seconds", type=float, default=60.0, help="the load stops after this long in any case")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--keep", action="store_true", help="keep the benchmark database (for profiling)")

    def handle(self, *args, nodes: int, pending: int, clients: int, requests: int, seconds: float, seed: int,
               keep: bool, **options):
        import random

        from scheduling.management.commands.bench_scheduler import _seed_synthetic

        with throwaway_database(keep=keep) as name:
            nodes_made, tasks_made = _seed_synthetic(random.Random(seed), nodes, pending)
            tokens = _client_tokens(clients)
            ceiling = measure_bind_ceiling()
            connections.close_all()
            self.stdout.write(f"database {name}: {nodes_made} nodes, {tasks_made} pending tasks, {clients} clients")
            self.stdout.write(f"bind_ceiling_per_s={ceiling.per_second:.1f}")
            samples, wall, cycles = _run_load(database_url(name), tokens, requests, seconds)
        self._print(samples, wall, cycles)

    def _print(self, samples: list[Sample], wall: float, cycles: tuple[int, int]) -> None:
        self.stdout.write(f"wall_s={wall:.2f} requests={len(samples)} "
                          f"requests_per_second={len(samples) / wall if wall else 0.0:.1f}")
        for kind in (SUBMIT, LIST):
            of_kind = [sample for sample in samples if sample.kind == kind]
            ordered = sorted(sample.milliseconds for sample in of_kind)
            errors = sum(not sample.ok for sample in of_kind)
            if not ordered:
                self.stdout.write(f"{kind} n=0")
                continue
            self.stdout.write(f"{kind} n={len(ordered)} p50_ms={percentile(ordered, 50):.1f} "
                              f"p99_ms={percentile(ordered, 99):.1f} max_ms={ordered[-1]:.1f} errors={errors}")
        self.stdout.write(f"cycles_during_load={cycles[0]} bound_during_load={cycles[1]}")


def _client_tokens(clients: int) -> list[str]:
    """One tenant user per client, spread over the seeded tenants."""
    from tenants.models import Tenant
    from tenants.services import tenant_user_create

    tenants = list(Tenant.objects.order_by("id"))
    return [
        tenant_user_create(tenant=tenants[index % len(tenants)], username=f"bench-client-{index}",
                           password=secrets.token_urlsafe(16))[1]
        for index in range(clients)
    ]


def _run_load(url: str, tokens: list[str], requests_each: int, seconds: float):
    """Start the server and a scheduler on the database at `url`, run the clients, stop both; the samples, the
    wall time of the load and (cycles, tasks bound) recorded by the scheduler during it."""
    from scheduling.models import CycleRecord

    environment = {**_environment(), "DATABASE_URL": url}
    port = free_port()
    with tempfile.TemporaryDirectory() as logs:
        server = _start([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                         "heteroflow_site.asgi:application"], {**environment, "DATABASE_POOL": "true"},
                        Path(logs) / "server.log")
        scheduler = None
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_until_serving(base, server, Path(logs) / "server.log")
            first_cycle = CycleRecord.objects.order_by("-id").values_list("id", flat=True).first() or 0
            scheduler = _start([sys.executable, "manage.py", "run_scheduler", "--interval", "1"], environment,
                               Path(logs) / "scheduler.log")
            samples: list[Sample] = []
            deadline = time.perf_counter() + seconds
            threads = [threading.Thread(target=_client, args=(base, token, index, requests_each, deadline, samples))
                       for index, token in enumerate(tokens)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - started
        finally:
            for process in (scheduler, server):
                if process is not None:
                    process.terminate()
                    process.wait(timeout=30)
    cycles = CycleRecord.objects.filter(id__gt=first_cycle)
    return samples, wall, (cycles.count(), sum(cycles.values_list("bound", flat=True)))


def _client(base: str, token: str, index: int, requests_each: int, deadline: float, samples: list[Sample]) -> None:
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    for serial in range(requests_each):
        if time.perf_counter() >= deadline:
            return
        kind = SUBMIT if serial % 2 == 0 else LIST
        started = time.perf_counter()
        try:
            if kind == SUBMIT:
                answer = session.post(f"{base}/api/v1/tasks", timeout=REQUEST_TIMEOUT_SECONDS, json={
                    "name": f"api-bench-{index}-{serial}", "gpu_required": 1, "cpu_cores": 1, "memory_mb": 1024,
                })
            else:
                answer = session.get(f"{base}/api/v1/tasks", timeout=REQUEST_TIMEOUT_SECONDS)
            ok = answer.ok
        except requests.RequestException:
            ok = False
        samples.append(Sample(kind, (time.perf_counter() - started) * 1000, ok))


def _environment() -> dict[str, str]:
    import os

    return {**os.environ, "DJANGO_SETTINGS_MODULE": "heteroflow_site.settings"}


def _start(command: list[str], environment: dict[str, str], log: Path) -> subprocess.Popen:
    handle = log.open("wb")
    return subprocess.Popen(command, cwd=settings.BASE_DIR, env=environment, stdout=handle, stderr=subprocess.STDOUT)


def _wait_until_serving(base: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise CommandError(f"the server exited with {server.returncode}:\n{log.read_text()}")
        try:
            requests.get(f"{base}/api/v1/tasks", timeout=5)
            return
        except requests.ConnectionError:
            time.sleep(0.2)
    raise CommandError(f"the server did not answer within {SERVER_START_SECONDS} s:\n{log.read_text()}")


