"""`manage.py soak`: the whole system under load while its parts die, then proof that nothing was lost or counted
twice (docs/operations.md, "Soak test").

Real processes on a throwaway database (`hf_soak_<pid>`) of the configured PostgreSQL and on a Redis server of the
run's own: two Daphne web processes, two scheduler instances, a Celery worker and beat, fleet processes of
simulated agents, and tenant clients over the HTTP API. Faults come on a seeded schedule (`scheduling.soak.faults`);
the invariants (`scheduling.soak.invariants`) are checked every few seconds and once after a quiet period. The last
line is `soak: tasks=N faults=F violations=V`; the exit status is 0 only when V is 0.
"""

from __future__ import annotations

import os
import random
import socket
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import requests
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError, connection

from scheduling.bench.database import database_url, throwaway_database
from scheduling.soak import faults as fault_kinds
from scheduling.soak import invariants
from scheduling.soak.cluster import child_environment, redis_server_command, seed_nodes, seed_tenants
from scheduling.soak.faults import FaultContext, FaultRecord
from scheduling.soak.processes import Supervisor, manage, venv_tool
from scheduling.soak.report import Report, sample
from scheduling.soak.tenants import Ledger, TenantClient

CHECK_SECONDS = 5.0
QUIET_SECONDS = 45.0
FLEET_PROCESSES = 3
START_WAIT_SECONDS = 120.0
# Agents and the control plane are compared twice this far apart: only what disagrees in both reads counts.
AGREEMENT_RECHECK_SECONDS = 15.0


class Command(BaseCommand):
    help = "Run the control plane's real processes under load and faults; check that nothing is lost or doubled."

    def add_arguments(self, parser):
        parser.add_argument("--minutes", type=float, default=8.0, help="length of the loaded part of the run")
        parser.add_argument("--nodes", type=int, default=24)
        parser.add_argument("--tenants", type=int, default=4)
        parser.add_argument("--rate", type=float, default=2.0, help="submissions per second, all tenants together")
        parser.add_argument("--faults", default="all",
                            help=f"all, none, or a comma-separated list of: {', '.join(fault_kinds.KINDS)}")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--report", type=Path, help="folder for report.json, report.md, timeline.svg and "
                                                         "the processes' logs (default .data/soak/<time>)")

    def handle(self, *args, minutes: float, nodes: int, tenants: int, rate: float, faults: str, seed: int,
               report: Path | None, **options):
        kinds = _fault_kinds(faults)
        if minutes <= 0 or nodes < FLEET_PROCESSES or tenants < 1 or rate <= 0:
            raise CommandError(f"--minutes and --rate must be positive, --nodes at least {FLEET_PROCESSES}, "
                               "--tenants at least 1")
        folder = report or Path(settings.DATA_DIR) / "soak" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        result = Report(minutes=minutes, nodes=nodes, tenants=tenants, rate=rate, seed=seed)
        with throwaway_database(prefix="hf_soak") as database:
            _Run(self, folder, database, result, kinds, seed).run(nodes=nodes, tenants=tenants, rate=rate)
        result.write(folder)
        self.stdout.write(f"report: {folder / 'report.md'}")
        for violation in result.violations:
            self.stdout.write(f"violation: {violation}")
        self.stdout.write(result.summary_line)
        if result.violations:
            sys.exit(1)


def _fault_kinds(text: str) -> list[str]:
    if text == "all":
        return list(fault_kinds.KINDS)
    if text == "none":
        return []
    kinds = [kind.strip() for kind in text.split(",") if kind.strip()]
    unknown = sorted(set(kinds) - set(fault_kinds.KINDS))
    if unknown or not kinds:
        raise CommandError(f"--faults: unknown kinds {unknown}; use all, none or some of {list(fault_kinds.KINDS)}")
    return kinds


class _Run:
    def __init__(self, command: BaseCommand, folder: Path, database: str, report: Report, kinds: list[str],
                 seed: int) -> None:
        self.command, self.folder, self.database, self.report = command, folder, database, report
        self.kinds, self.seed = kinds, seed
        self.supervisor = Supervisor(folder / "logs")
        self.ledger = Ledger()
        self.violations: dict[str, None] = {}
        self.stop_tenants = threading.Event()
        self.started = time.monotonic()

    def say(self, text: str) -> None:
        self.command.stdout.write(f"[{time.monotonic() - self.started:6.0f} s] {text}")

    def run(self, *, nodes: int, tenants: int, rate: float) -> None:
        seed_nodes(nodes)
        logins = seed_tenants(tenants)
        from nodes.models import Node

        gpu_types = sorted(set(Node.objects.values_list("gpu_type", flat=True)))
        fleet_nodes = self._start_processes()
        try:
            servers = [f"http://127.0.0.1:{port}" for port in self.ports]
            clients = [TenantClient(login, servers=servers, rate=rate / tenants, gpu_types=gpu_types,
                                    ledger=self.ledger, stop=self.stop_tenants, seed=self.seed * 1000 + index)
                       for index, login in enumerate(logins)]
            for client in clients:
                client.start()
            context = FaultContext(self.supervisor, servers, logins[0].token, self.database, fleet_nodes, [],
                                   fleet_state=self.folder / "fleet")
            injector = threading.Thread(target=self._inject, args=(context,), daemon=True)
            injector.start()
            self._loaded_part(context)
            self.stop_tenants.set()
            injector.join(timeout=fault_kinds.RECOVERY_LIMIT_SECONDS + 120)
            self.say(f"tenants stopped; quiet for {QUIET_SECONDS:.0f} s")
            self._tick(until=time.monotonic() + QUIET_SECONDS, context=context)
            self._final_checks(fleet_nodes, context)
        finally:
            self.stop_tenants.set()
            self.supervisor.stop_all()
            connection.close()

    def _start_processes(self) -> dict[str, list[str]]:
        from nodes.models import Node

        socket_path = self.folder / "redis.sock"
        self.folder.mkdir(parents=True, exist_ok=True)
        self.supervisor.add("redis", redis_server_command(socket_path), dict(os.environ))
        env = child_environment(dict(os.environ), database_url=database_url(self.database),
                                redis_url=f"unix://{socket_path}")
        self.ports = [_free_port(), _free_port()]
        for number, port in enumerate(self.ports, start=1):
            self.supervisor.add(f"web-{number}", venv_tool("daphne", "-v", "0", "-b", "127.0.0.1", "-p", str(port),
                                                           "heteroflow_site.asgi:application"),
                                {**env, "DATABASE_POOL": "true"})
        for number in (1, 2):
            self.supervisor.add(f"scheduler-{number}", manage("run_scheduler", "--interval", "2",
                                                              "--instance", f"soak-{number}"), env)
        self.supervisor.add("worker", venv_tool("celery", "-A", "heteroflow_site", "worker", "--concurrency", "1",
                                                "--loglevel", "WARNING"), env)
        self.supervisor.add("beat", venv_tool("celery", "-A", "heteroflow_site", "beat", "--loglevel", "WARNING",
                                              "--schedule", str(self.folder / "beat-schedule")), env)
        self._wait_for_web()
        names = sorted(Node.objects.values_list("name", flat=True))
        fleet_nodes = {}
        for index in range(FLEET_PROCESSES):
            name = f"fleet-{index + 1}"
            fleet_nodes[name] = names[index::FLEET_PROCESSES]
            server = f"http://127.0.0.1:{self.ports[index % len(self.ports)]}"
            self.supervisor.add(name, manage("simulate_fleet", "--server", server, "--speedup", "10",
                                             "--interval", "3", "--shard", f"{index}/{FLEET_PROCESSES}",
                                             "--state-dir", str(self.folder / "fleet")), env)
        self.say(f"started {len(self.supervisor.processes)} processes on database {self.database}")
        return fleet_nodes

    def _wait_for_web(self) -> None:
        deadline = time.monotonic() + START_WAIT_SECONDS
        for port in self.ports:
            while True:
                try:
                    if requests.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code < 500:
                        break
                except requests.RequestException:
                    pass
                if time.monotonic() > deadline:
                    raise CommandError(f"web process on port {port} did not answer; see {self.folder / 'logs'}")
                time.sleep(0.5)

    def _inject(self, context: FaultContext) -> None:
        rng = random.Random(self.seed)
        for due, kind in fault_kinds.schedule(self.kinds, minutes=self.report.minutes, seed=self.seed):
            while time.monotonic() - self.started < due:
                if self.stop_tenants.wait(0.5):
                    return
            at = time.monotonic() - self.started
            detail = fault_kinds.inject(kind, context, rng)
            ended = time.time()
            recovery = None
            while time.time() - ended < fault_kinds.RECOVERY_LIMIT_SECONDS:
                if fault_kinds.recovered(context, ended):
                    recovery = round(time.time() - ended, 1)
                    break
                time.sleep(1)
            if recovery is None:
                context.violations.append(f"{kind}: not back within {fault_kinds.RECOVERY_LIMIT_SECONDS:.0f} s")
            self.report.faults.append(FaultRecord(kind, round(at, 1), detail, recovery))
            self.say(f"fault {kind}: {detail}; back after {recovery} s")

    def _loaded_part(self, context: FaultContext) -> None:
        self._tick(until=self.started + self.report.minutes * 60, context=context)

    def _tick(self, *, until: float, context: FaultContext) -> None:
        last = datetime.now(UTC)
        while time.monotonic() < until:
            time.sleep(CHECK_SECONDS)
            self.supervisor.revive_dead()
            now = datetime.now(UTC)
            try:
                self.report.samples.append(sample(at=time.monotonic() - self.started, since=last, until=now))
                self._violations(invariants.during_run(self.ledger))
            except OperationalError:
                connection.close()  # the postgres fault: checked again at the next tick
                continue
            self._violations(context.violations)
            last = now

    def _final_checks(self, fleet_nodes: dict[str, list[str]], context: FaultContext) -> None:
        from nodes.models import Node
        from scheduling.models import Task

        online = list(Node.objects.exclude(status=Node.Status.OFFLINE).values_list("name", flat=True))
        self._violations(invariants.after_quiet(self.ledger))
        first = invariants.agent_disagreements(self.folder / "fleet", online)
        time.sleep(AGREEMENT_RECHECK_SECONDS)
        lasting = first & invariants.agent_disagreements(self.folder / "fleet", online)
        self._violations(invariants.agents_agree(lasting))
        self._violations(context.violations)
        self._violations(f"process {name} is not running at the end" for name, managed
                         in self.supervisor.processes.items() if not managed.alive)
        self.report.violations = list(self.violations)
        self.report.restarted = {name: managed.starts - 1 for name, managed in self.supervisor.processes.items()
                                 if managed.starts > 1}
        with self.ledger.lock:
            self.report.submitted = len(self.ledger.tasks) + len(self.ledger.groups)
            self.report.answers = {str(key): value for key, value in self.ledger.statuses.items()}
            self.report.server_errors = list(self.ledger.server_errors)
        self.report.statuses = invariants.tasks_by_status()
        self.report.bound = Task.objects.filter(scheduled_at__isnull=False).count()
        self.report.finished = Task.objects.filter(finished_at__isnull=False).count()

    def _violations(self, found) -> None:
        for violation in found:
            if violation not in self.violations:
                self.violations[violation] = None
                self.say(f"violation: {violation}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
