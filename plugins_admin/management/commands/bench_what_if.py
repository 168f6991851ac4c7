"""Does a what-if preview slow the live scheduler? Cycle time with and without previews running concurrently.

In a throwaway database (`hf_bench_<pid>`, seeded as `bench_scheduler` seeds it) this process runs scheduling
cycles in pairs, one alone and one while another process — as the web server would — previews enabling binpack
(`POST /api/v1/scheduler/what-if`'s work) back to back. It prints cycle time p50/p90 for each, their
ratio (`what_if_slowdown_p50`), and the preview's own duration. Both figures come from the same run and the
same cluster, so the machine's speed cancels out.

    .venv/bin/python manage.py bench_what_if [--nodes 300] [--pending 4000] [--cycles 12]
"""

import multiprocessing
import os
import random
import time

from django.core.management.base import BaseCommand
from django.db import connections

from scheduling.bench.database import database_url, throwaway_database
from scheduling.bench.figures import percentile
from scheduling.management.commands.bench_scheduler import _seed_synthetic


class Command(BaseCommand):
    help = "Cycle time alone vs with what-if previews running in another process, in a throwaway database."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=300)
        parser.add_argument("--pending", type=int, default=4000)
        parser.add_argument("--cycles", type=int, default=12, help="pairs of cycles: one alone, one with previews")
        parser.add_argument("--seed", type=int, default=1)

    def handle(self, *args, nodes: int, pending: int, cycles: int, seed: int, **options):
        with throwaway_database() as bench:
            nodes_made, tasks_made = _seed_synthetic(random.Random(seed), nodes, pending)
            self.stdout.write(f"database {bench}: {nodes_made} nodes, {tasks_made} pending tasks")
            connections.close_all()
            self._print(*_measure(bench, cycles=cycles, seed=seed))

    def _print(self, durations: dict[str, list[float]], previews: list[float]) -> None:
        for label, values in durations.items():
            ordered = sorted(values)
            self.stdout.write(f"cycle_ms {label}: p50={percentile(ordered, 50):.1f} p90={percentile(ordered, 90):.1f} "
                              f"(n={len(ordered)})")
        alone = percentile(sorted(durations["alone"]), 50)
        concurrent = percentile(sorted(durations["with what-if"]), 50)
        ordered = sorted(previews)
        if ordered:
            self.stdout.write(f"what_if_ms p50={percentile(ordered, 50):.1f} p90={percentile(ordered, 90):.1f} "
                              f"(n={len(ordered)} previews of 200 tasks × 2 plugin sets)")
        self.stdout.write(f"what_if_slowdown_p50={concurrent / alone if alone else 0.0:.3f}")


def _measure(database: str, *, cycles: int, seed: int) -> tuple[dict[str, list[float]], list[float]]:
    """`cycles` pairs of cycles, one alone and one while a preview runs, in alternating order so that the cluster's
    drift (it fills up as the cycles bind) weighs on both sides alike."""
    from scheduling.cycle.run import run_cycle

    context = multiprocessing.get_context("spawn")
    wanted, busy, stop, results = context.Event(), context.Event(), context.Event(), context.Queue()
    process = context.Process(target=_preview_process, args=(database_url(database), wanted, busy, stop, results))
    process.start()
    rng = random.Random(seed)
    durations: dict[str, list[float]] = {"alone": [], "with what-if": []}
    try:
        for pair in range(cycles):
            for with_previews in ((False, True) if pair % 2 == 0 else (True, False)):
                if with_previews:
                    wanted.set()
                    _wait_until(busy.is_set)  # a preview is under way when the cycle starts
                else:
                    wanted.clear()
                    _wait_until(lambda: not busy.is_set())  # and none is when it runs alone
                durations["with what-if" if with_previews else "alone"].append(run_cycle(rng=rng).duration_ms)
        wanted.clear()
    finally:
        stop.set()
        previews = results.get(timeout=600)
        process.join()
    return durations, previews


def _wait_until(condition, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


def _preview_process(database_url: str, wanted, busy, stop, results) -> None:
    os.environ["DATABASE_URL"] = database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heteroflow_site.settings")
    import django

    django.setup()
    from plugins_admin.rules import PluginChangeRequest
    from plugins_admin.what_if import plugin_change_preview

    durations = []
    while not stop.is_set():
        if not wanted.wait(0.05):
            continue
        busy.set()
        clock = time.perf_counter()
        plugin_change_preview(requests=[PluginChangeRequest("binpack", enabled=True)])
        durations.append((time.perf_counter() - clock) * 1000)
        if not wanted.is_set():
            busy.clear()
    busy.clear()
    results.put(durations)
