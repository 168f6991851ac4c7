"""API latency under load, in a throwaway database: a real ASGI server (Daphne, as in production) and N client
threads that each submit a task, list the newest 100 tasks (`GET /api/v1/tasks`) and open the page of the task they
submitted (`/tasks/{id}/`, a logged-in session), in turn over HTTP: first with the scheduler idle, then while a
scheduler runs cycles (`--phases` chooses).

Prints `bind_ceiling_per_s` (measured in the same run, before the load), the size of a 100-task list after the load
(the newest tasks, with the attempts the cycles wrote), then per phase and request kind the count, p50, p99, max
latency in milliseconds and the errors (non-2xx answers and failed connections), and the cycles that ran while the
clients did. `--web-processes 1,2` runs it all once per count of web processes on one port
(`heteroflow_site.web_workers`, as compose runs the web tier), each on a fresh database of the same seed.
`--scheduler-nice N` runs the scheduler at that lower OS priority, so the figures show what the web
process answers when it does not compete with the scheduler for the cores. Bounded: each client stops after
--requests requests or --seconds, whichever comes first, in each phase.
"""

import argparse
import os
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

from scheduling.bench.arguments import counts
from scheduling.bench.bind_ceiling import measure_bind_ceiling
from scheduling.bench.database import database_url, statistics_kept, throwaway_database
from scheduling.bench.figures import percentile
from scheduling.bench.network import free_port

SUBMIT, LIST, PAGE = "submit", "list", "page"
KINDS = (SUBMIT, LIST, PAGE)
IDLE, CYCLING = "idle", "cycling"
LIST_SIZE = 100
SERVER_START_SECONDS = 60
# A request slower than this is counted as an error (and the client goes on).
REQUEST_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class Sample:
    kind: str
    milliseconds: float
    ok: bool


@dataclass(frozen=True)
class Client:
    token: str
    session_cookie: str


class Command(BaseCommand):
    help = ("Benchmark API latency (submit, list, a task's page) with N client threads against Daphne, with the "
            "scheduler idle and while it runs cycles.")

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=300)
        parser.add_argument("--pending", type=int, default=2000, help="pending tasks seeded before the load")
        parser.add_argument("--clients", type=int, default=8)
        parser.add_argument("--requests", type=int, default=300,
                            help="requests per client and phase (submit, list, page in turn)")
        parser.add_argument("--seconds", type=float, default=60.0,
                            help="each phase's load stops after this long in any case")
        parser.add_argument("--phases", type=_phases, default=[IDLE, CYCLING],
                            help="idle (no scheduler), cycling (a scheduler runs cycles), or both in that order")
        parser.add_argument("--scheduler-nice", type=int, default=0,
                            help="run the scheduler at this lower OS priority (os.nice increment)")
        parser.add_argument("--web-processes", type=counts, default=[1],
                            help="Daphne processes serving the port; comma-separated runs each count")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--keep", action="store_true", help="keep the benchmark database (for profiling)")

    def handle(self, *args, nodes: int, pending: int, clients: int, requests: int, seconds: float,
               phases: list[str], scheduler_nice: int, seed: int, keep: bool, web_processes: list[int],
               **options):
        import random

        from scheduling.management.commands.bench_scheduler import _seed_synthetic

        for processes in web_processes:
            with throwaway_database(keep=keep) as name:
                nodes_made, tasks_made = _seed_synthetic(random.Random(seed), nodes, pending)
                users = _client_users(clients)
                ceiling = measure_bind_ceiling()
                connections.close_all()
                self.stdout.write(f"database {name}: {nodes_made} nodes, {tasks_made} pending tasks, {clients} "
                                  f"clients, {processes} web process(es)")
                self.stdout.write(f"bind_ceiling_per_s={ceiling.per_second:.1f}")
                with statistics_kept():
                    runs = _run_load(database_url(name), users, requests, seconds, phases=phases,
                                     scheduler_nice=scheduler_nice, web_processes=processes)
            self.stdout.write(f"web_processes={processes}")
            self.stdout.write(f"list_bytes={runs.list_bytes} (GET /api/v1/tasks, {LIST_SIZE} tasks)")
            for phase, (samples, wall, cycles) in runs.phases.items():
                self._print(phase, samples, wall, cycles)

    def _print(self, phase: str, samples: list[Sample], wall: float, cycles: tuple[int, int] | None) -> None:
        self.stdout.write(f"phase={phase} wall_s={wall:.2f} requests={len(samples)} "
                          f"requests_per_second={len(samples) / wall if wall else 0.0:.1f}")
        for kind in KINDS:
            of_kind = [sample for sample in samples if sample.kind == kind]
            ordered = sorted(sample.milliseconds for sample in of_kind)
            errors = sum(not sample.ok for sample in of_kind)
            if not ordered:
                self.stdout.write(f"{kind} n=0")
                continue
            self.stdout.write(f"{phase} {kind} n={len(ordered)} p50_ms={percentile(ordered, 50):.1f} "
                              f"p99_ms={percentile(ordered, 99):.1f} max_ms={ordered[-1]:.1f} errors={errors}")
        if cycles is not None:
            self.stdout.write(f"cycles_during_load={cycles[0]} bound_during_load={cycles[1]}")


def _phases(text: str) -> list[str]:
    phases = text.split(",")
    if not phases or any(phase not in (IDLE, CYCLING) for phase in phases):
        raise argparse.ArgumentTypeError(f"phases are {IDLE} and {CYCLING}: {text!r}")
    return phases




def _client_users(clients: int) -> list[Client]:
    """One tenant user per client, spread over the seeded tenants: its API token and a logged-in session."""
    from django.test import Client as DjangoClient

    from tenants.models import Tenant
    from tenants.services import tenant_user_create

    tenants = list(Tenant.objects.order_by("id"))
    made = []
    for index in range(clients):
        user, token = tenant_user_create(tenant=tenants[index % len(tenants)], username=f"bench-client-{index}",
                                         password=secrets.token_urlsafe(16))
        browser = DjangoClient()
        browser.force_login(user)
        made.append(Client(token=token, session_cookie=browser.cookies[settings.SESSION_COOKIE_NAME].value))
    return made


@dataclass
class _Runs:
    list_bytes: int
    # Phase → (samples, wall seconds, (cycles, tasks bound) during it or None when idle).
    phases: dict[str, tuple[list[Sample], float, tuple[int, int] | None]]


def _run_load(url: str, clients: list[Client], requests_each: int, seconds: float, *, phases: list[str],
              scheduler_nice: int, web_processes: int) -> _Runs:
    """Start the server on the database at `url`, run the clients once per phase (a scheduler running cycles
    during the cycling phase), stop everything."""
    from scheduling.models import CycleRecord

    environment = {**_environment(), "DATABASE_URL": url}
    port = free_port()
    with tempfile.TemporaryDirectory() as logs:
        server = _start([sys.executable, "-m", "heteroflow_site.web_workers", "--bind", "127.0.0.1", "--port",
                         str(port), "--processes", str(web_processes)], {**environment, "DATABASE_POOL": "true"},
                        Path(logs) / "server.log")
        scheduler = None
        runs = _Runs(list_bytes=0, phases={})
        try:
            base = f"http://127.0.0.1:{port}"
            _wait_until_serving(base, server, Path(logs) / "server.log")
            for phase in phases:
                first_cycle = CycleRecord.objects.order_by("-id").values_list("id", flat=True).first() or 0
                if phase == CYCLING:
                    scheduler = _start([sys.executable, "manage.py", "run_scheduler", "--interval", "1"],
                                       environment, Path(logs) / "scheduler.log", nice=scheduler_nice)
                samples, wall = _run_clients(base, clients, requests_each, seconds, phase)
                cycles = None
                if phase == CYCLING:
                    records = CycleRecord.objects.filter(id__gt=first_cycle)
                    cycles = (records.count(), sum(records.values_list("bound", flat=True)))
                runs.phases[phase] = (samples, wall, cycles)
            # After the load, when the newest tasks carry the attempts the cycles wrote.
            runs.list_bytes = _list_bytes(base, clients[0])
        finally:
            for process in (scheduler, server):
                if process is not None:
                    process.terminate()
                    process.wait(timeout=30)
    return runs


def _run_clients(base: str, clients: list[Client], requests_each: int, seconds: float,
                 phase: str) -> tuple[list[Sample], float]:
    samples: list[Sample] = []
    deadline = time.perf_counter() + seconds
    threads = [threading.Thread(target=_client, args=(base, client, f"{phase}-{index}", requests_each, deadline,
                                                      samples))
               for index, client in enumerate(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return samples, time.perf_counter() - started


def _list_bytes(base: str, client: Client) -> int:
    answer = requests.get(f"{base}/api/v1/tasks", params={"limit": LIST_SIZE}, timeout=REQUEST_TIMEOUT_SECONDS,
                          headers={"Authorization": f"Token {client.token}"})
    answer.raise_for_status()
    return len(answer.content)


def _client(base: str, client: Client, name: str, requests_each: int, deadline: float,
            samples: list[Sample]) -> None:
    api = requests.Session()
    api.headers["Authorization"] = f"Token {client.token}"
    # The session cookie is sent as a header: the cookie jar keeps a Secure cookie off plain HTTP.
    pages = requests.Session()
    pages.headers["Cookie"] = f"{settings.SESSION_COOKIE_NAME}={client.session_cookie}"
    submitted = None
    for serial in range(requests_each):
        if time.perf_counter() >= deadline:
            return
        kind = KINDS[serial % len(KINDS)]
        started = time.perf_counter()
        try:
            if kind == SUBMIT:
                # At the head of the queue: the newest tasks, which the list shows, are attempted while it runs.
                answer = api.post(f"{base}/api/v1/tasks", timeout=REQUEST_TIMEOUT_SECONDS, json={
                    "name": f"api-bench-{name}-{serial}", "gpu_required": 1, "cpu_cores": 1, "memory_mb": 1024,
                    "priority": 100,
                })
                if answer.ok:
                    submitted = answer.json()["id"]
            elif kind == LIST:
                answer = api.get(f"{base}/api/v1/tasks", params={"limit": LIST_SIZE},
                                 timeout=REQUEST_TIMEOUT_SECONDS)
            elif submitted is None:
                continue
            else:
                answer = pages.get(f"{base}/tasks/{submitted}/", timeout=REQUEST_TIMEOUT_SECONDS,
                                   allow_redirects=False)
            ok = answer.ok
        except requests.RequestException:
            ok = False
        samples.append(Sample(kind, (time.perf_counter() - started) * 1000, ok))


def _environment() -> dict[str, str]:
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "heteroflow_site.settings"}


def _start(command: list[str], environment: dict[str, str], log: Path, *, nice: int = 0) -> subprocess.Popen:
    handle = log.open("wb")
    return subprocess.Popen(command, cwd=settings.BASE_DIR, env=environment, stdout=handle, stderr=subprocess.STDOUT,
                            preexec_fn=(lambda: os.nice(nice)) if nice else None)


def _wait_until_serving(base: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise CommandError(f"the server exited with {server.returncode}:\n{log.read_text()}")
        try:
            requests.get(f"{base}/api/v1/tasks", timeout=5)
            return
        # The port listens before the processes start (web_workers binds it first): a request made meanwhile
        # waits in the backlog rather than being refused.
        except (requests.ConnectionError, requests.Timeout):
            time.sleep(0.2)
    raise CommandError(f"the server did not answer within {SERVER_START_SECONDS} s:\n{log.read_text()}")


