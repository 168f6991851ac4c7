"""End-to-end scheduler benchmark in a throwaway database (`hf_bench_<pid>` on the default database's server).

Seeds a heterogeneous cluster and a pending queue, then runs scheduling cycles in K scheduler processes (taking
turns, or at once with --concurrent-cycles) until nothing more binds, and prints cycle time p50/p99, wall time,
peak memory and `tasks_per_second=<float>` (tasks bound per second until the last bind, commits included; the
passes that then find nothing more to bind are in `wall_s`, not in the rate) beside
`bind_ceiling_per_s` (`scheduling.bench.bind_ceiling`, measured right after on the same database) and their
`ratio=`. `--instances 1,2,4` runs each count on a fresh database and prints the scaling against the first;
`--quotas off,on` runs each instance count without and with the quotas of design §16.2 (per-type nominal quotas, a
cohort, a total cap) on fresh databases of the same seed and prints the cycle's cost with quotas against without;
`--layout spread,fgd` likewise runs each layout scorer on a fresh database of the same seed and prints each one's
cost against the first's (the same run's reference); `--big-jobs off,on,defrag` likewise without and with design
§16.3's taints, tolerations and reservation, and with the defrag plugin enabled as well; `--queue-order
priority,fair-share` likewise with each queue-sort order (design §17.4), over the same usage records.
`--stats none,seeded,fresh` runs each case under each state of PostgreSQL's planner statistics
(`scheduling.bench.database.statistics_kept`) and prints the worst; `--explain-over MS` has the server log the plan
of every statement slower than that. `--rounds N` runs all of it N times in turn, every other round in reverse
order, and prints each comparison's ratios as their median, lowest and highest over the rounds: on a machine whose
speed drifts between runs, one pair of runs can put one case ahead or behind by a third (an even number of rounds
runs each case first as often as last). `--reference-ceiling` also runs the issues' reference ceiling
(`scheduling.bench.bind_ceiling.reference_ceiling`) right before and right after each run and prints the rate
divided by their mean (`reference_ratio=`), the figure the issues' goals are stated in; with `--stats`, the worst
state's, and with `--rounds`, its median over the rounds.

Model imports stay inside functions: the scheduler processes are spawned and import this module before
`django.setup()`.
"""

import argparse
import csv
import itertools
import math
import multiprocessing
import os
import random
import statistics
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from django.core.management.base import BaseCommand
from django.db import connections

from scheduling.bench.arguments import counts
from scheduling.bench.database import (
    STATISTICS_STATES,
    database_url,
    explain_slow_statements,
    statistics_kept,
    throwaway_database,
)
from scheduling.bench.figures import max_rss_mb, percentile, process_cpu_seconds, rows_read

GPU_TYPE_WEIGHTS = {
    "nvidia": 40, "ascend": 10, "musa": 6, "hygon": 8, "metax": 6, "enflame": 6, "iluvatar": 6, "biren": 6,
    "cambricon": 6, "kunlun": 6,
}
CARD_COUNT_WEIGHTS = {1: 5, 2: 15, 4: 30, 8: 50}
TENANTS = 5
# HETEROFLOW_RESERVE_AFTER in the scheduler processes: with --big-jobs on every waiting 2+-card job may reserve.
RESERVE_AT_ONCE = 0
RESERVE_NEVER = 10**9
# The live pages' receiver (scheduling.web.live), which renders and publishes each task's row after its transition.
LIVE_TASK_RECEIVER = "scheduling.web.live.task_status"
# From the file, not the settings: the spawned scheduler processes import this module before they choose a database.
OPENB_DIR = Path(__file__).resolve().parents[3] / "data" / "traces" / "openb"
# The figures each comparison divides, second by first (`Command._compare`).
COMPARED = ("cycle_ms_p50", "cycle_ms_per_task", "tasks_per_second")
# Card memory of the openb models (G1–G3 are undisclosed; taken as 32 GB cards).
OPENB_MEMORY_MB = {"P100": 16384, "T4": 15360, "V100M16": 16384, "V100M32": 32768, "A10": 23028}


class Command(BaseCommand):
    help = "Benchmark scheduling cycles end to end on a synthetic (or openb trace) cluster in a throwaway database."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=300)
        parser.add_argument("--pending", type=int, default=2000)
        parser.add_argument("--instances", type=counts, default=[1],
                            help="scheduler processes, or a list (1,2,4): each count runs on a fresh database")
        parser.add_argument("--concurrent-cycles", action="store_true",
                            help="instances run cycles at once instead of in turns (HETEROFLOW_CONCURRENT_CYCLES)")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--trace", choices=["openb"], help="nodes and tasks from the openb trace instead")
        parser.add_argument("--keep", action="store_true", help="keep the benchmark database (for profiling)")
        parser.add_argument("--layout", type=_layouts, default=["spread"],
                            help="layout scorer (the replay_trace policies: spread, binpack, fgd, fgd-paper), or a "
                                 "list (spread,fgd) compared against the first; fgd measures against the seeded "
                                 "tasks")
        parser.add_argument("--without-live-updates", action="store_true",
                            help="disconnect the live pages' task_transitioned receiver in the scheduler processes")
        parser.add_argument("--quotas", type=_modes("off", "on"), default=["off"],
                            help="off, on, or off,on: with quotas every tenant gets a per-type nominal quota of its "
                                 "share of each type's cards, a total cap of all cards and one cohort (design "
                                 "§16.2); the seeded tasks are the same")
        parser.add_argument("--big-jobs", type=_modes("off", "on", "defrag"), default=["off"],
                            help="off, on, defrag, or several, e.g. off,on,defrag: with big jobs a tenth of the nodes "
                                 "carry a NoSchedule taint and a twentieth a PreferNoSchedule one, the 8-card tasks and "
                                 "a fifth of the others tolerate them, and reservation acts at once "
                                 "(HETEROFLOW_RESERVE_AFTER=0; off: never); defrag: on with the defrag plugin enabled "
                                 "(design §16.3); the seeded tasks are the same; each against the first")
        parser.add_argument("--stats", type=_modes(*STATISTICS_STATES), default=["fresh"],
                            help="planner statistics of each run: none (never analyzed), seeded (analyzed once, "
                                 "right after seeding: every task pending), fresh (analyzed again every 10 s); "
                                 "comma-separated runs each on a fresh database and prints the worst")
        parser.add_argument("--explain-over", type=int, metavar="MS",
                            help="the server logs the plan (auto_explain, actual rows and buffers) of every "
                                 "statement of the run slower than MS milliseconds")
        parser.add_argument("--queue-order", type=_modes("priority", "fair-share", "weighted"), default=["priority"],
                            help="the queue-sort order, or several, e.g. priority,fair-share: each on a fresh "
                                 "database of the same seed, with ninety days of usage records per tenant, GPU type "
                                 "and task type (what fair-share reads, design §17.4); each against the first")
        parser.add_argument("--rounds", type=int, choices=range(1, 21), default=1, metavar="N",
                            help="run every case N times, in turn (1 to 20), every other round in reverse order: "
                                 "each comparison's ratios then also as the median, lowest and highest over the "
                                 "rounds, the figure to quote on a machine whose speed drifts between runs")
        parser.add_argument("--reference-ceiling", action="store_true",
                            help="run the issues' reference ceiling right before and after each run and print the "
                                 "rate divided by their mean (reference_ratio=)")
        parser.add_argument("--without-metrics", action="store_true",
                            help="record no per-cycle metrics (duration, binds, queue latency) in the scheduler "
                                 "processes: the reference their cost is measured against")

    def handle(self, *args, rounds: int, **options):
        compared = defaultdict(list)
        reference_ratios = defaultdict(list)
        for number in range(1, rounds + 1):
            # Every other round runs its cases the other way round, so that what favours a run by its place (a
            # machine slowing down or warming up over a round) favours each case alike over an even number of rounds.
            reverse = number % 2 == 0
            if rounds > 1:
                self.stdout.write(f"round {number} of {rounds}" + (", cases in reverse order" if reverse else ""))
            comparisons, worst_reference_ratios = self._round(reverse=reverse, **options)
            for title, first, second, ratios in comparisons:
                compared[title, first, second].append(ratios)
            for case, ratio in worst_reference_ratios.items():
                reference_ratios[case].append(ratio)
        if rounds > 1:
            # Each round runs every case once, so each ratio is of two runs a few seconds apart.
            for (title, first, second), ratios in compared.items():
                self.stdout.write(f"{title} over {rounds} rounds, {second}/{first}: " + "; ".join(
                    f"{name} median={statistics.median(values):.3f} min={min(values):.3f} max={max(values):.3f}"
                    for name, values in zip(COMPARED, zip(*ratios))))
            for (count, _, layout_name, *_), values in reference_ratios.items():
                self.stdout.write(f"reference_ratio instances={count} layout={layout_name} over {rounds} rounds, "
                                  f"worst state: median={statistics.median(values):.3f} min={min(values):.3f} "
                                  f"max={max(values):.3f}")

    def _round(self, *, nodes: int, pending: int, instances: list[int], concurrent_cycles: bool, seed: int,
               trace: str | None, keep: bool, without_live_updates: bool, without_metrics: bool,
               layout: list[str], quotas: list[str], big_jobs: list[str], queue_order: list[str], stats: list[str],
               explain_over: int | None, reference_ceiling: bool, reverse: bool = False,
               **options) -> tuple[list[tuple[str, str, str, tuple[float, ...]]], dict[tuple, float]]:
        """Every run once (`reverse`: last case first); the comparisons' ratios (title, first, second, a ratio per
        `COMPARED` figure), and with `reference_ceiling` each case's worst reference ratio over its statistics
        states (by instances, quotas, layout, big jobs and queue order)."""
        from scheduling.bench.bind_ceiling import measure_bind_ceiling
        from scheduling.bench.bind_ceiling import reference_ceiling as measure_reference_ceiling

        throughput = {}
        comparisons = []
        runs = [(count, mode, name, pools, order, state) for count in instances for mode in quotas for name in layout
                for pools in big_jobs for order in queue_order for state in stats]
        by_state = {}
        reference_ratios = {}
        for count, quota_mode, layout_name, pools_mode, order, stats_state in reversed(runs) if reverse else runs:
            with throwaway_database(keep=keep) as bench:
                started = time.perf_counter()
                rng = random.Random(seed)
                if trace == "openb":
                    nodes_made, tasks_made = _seed_openb(rng, nodes, pending)
                else:
                    nodes_made, tasks_made = _seed_synthetic(rng, nodes, pending)
                if quota_mode == "on":
                    _seed_quotas()
                if pools_mode != "off":
                    _seed_pools(random.Random(seed), defrag=pools_mode == "defrag")
                _use_layout(layout_name)
                if queue_order != ["priority"]:
                    _seed_usage(random.Random(seed), order)
                self.stdout.write(f"database {bench}: {nodes_made} nodes, {tasks_made} pending tasks, layout "
                                  f"{layout_name}, quotas {quota_mode}, big jobs {pools_mode}, queue order {order} "
                                  f"(statistics {stats_state}; migrated and seeded in "
                                  f"{time.perf_counter() - started:.1f} s)")
                if explain_over is not None:
                    explain_slow_statements(bench, over_ms=explain_over)
                connections.close_all()
                references = [measure_reference_ceiling(database_url(bench))] if reference_ceiling else []
                try:
                    with statistics_kept(stats_state):
                        report = _run_instances(
                            bench, count, seed, live_updates=not without_live_updates, metrics=not without_metrics,
                            concurrent_cycles=concurrent_cycles,
                            reserve_after=RESERVE_AT_ONCE if pools_mode != "off" else RESERVE_NEVER)
                finally:
                    _forget_window()
                # Right after the cycles, on the same database and machine load: the reference to divide by.
                ceiling = measure_bind_ceiling()
                figures = (self._print(report, tasks_made, ceiling.per_second), _cycle_cost(report))
                by_state[count, quota_mode, layout_name, pools_mode, order, stats_state] = figures + (
                    ceiling.per_second,)
                if references:
                    connections.close_all()
                    references.append(measure_reference_ceiling(database_url(bench)))
                    ratio = figures[0] / statistics.mean(references)
                    self.stdout.write(f"reference_ceiling_per_s before={references[0]:.0f} after={references[1]:.0f} "
                                      f"reference_ratio={ratio:.4f} (tasks_per_second / their mean)")
                    case = (count, quota_mode, layout_name, pools_mode, order)
                    reference_ratios[case] = min(ratio, reference_ratios.get(case, math.inf))
        # Every other comparison is between the worst statistics state of each case.
        for *case, stats_state in runs:
            case = tuple(case)
            figures = by_state[case + (stats_state,)]
            if case not in throughput or figures[0] < throughput[case][0]:
                throughput[case] = figures[:2]
        if len(stats) > 1:
            for case, (rate, _) in throughput.items():
                per_state = {state: by_state[case + (state,)] for state in stats}
                self.stdout.write(
                    f"statistics instances={case[0]} layout={case[2]}: " + "; ".join(
                        f"{state} tasks_per_second={rate_:.1f} cycle_ms_p50={p50:.1f} ratio={rate_ / ceiling:.3f}"
                        for state, (rate_, (p50, _), ceiling) in per_state.items())
                    + f"; worst tasks_per_second={rate:.1f}"
                    + (f" worst reference_ratio={reference_ratios[case]:.3f}" if reference_ratios else ""))

        def run_of(count: int, *, quota: str = quotas[0], name: str = layout[0], pools: str = big_jobs[0],
                   order: str = queue_order[0]) -> tuple:
            """A run's figures (the worst statistics state), by what differs from the first run of its count."""
            return throughput[count, quota, name, pools, order]

        if len(instances) > 1:
            rates = {count: run_of(count)[0] for count in instances}
            first = rates[instances[0]] or 1.0
            self.stdout.write("scaling " + " ".join(f"instances={count}:{rates[count] / first:.2f}x"
                                                    for count in instances))
        if len(quotas) > 1:
            for count in instances:
                comparisons.append(self._compare(f"quotas instances={count}", "off", run_of(count, quota="off"), "on",
                                                 run_of(count, quota="on")))
        for name in layout[1:]:
            for count in instances:
                comparisons.append(self._compare(f"layout instances={count}", layout[0], run_of(count), name,
                                                 run_of(count, name=name)))
        for mode in big_jobs[1:]:
            for count in instances:
                comparisons.append(self._compare(f"big_jobs instances={count}", big_jobs[0], run_of(count), mode,
                                                 run_of(count, pools=mode)))
        for order in queue_order[1:]:
            for count in instances:
                comparisons.append(self._compare(f"queue_order instances={count}", queue_order[0], run_of(count),
                                                 order, run_of(count, order=order)))
        return comparisons, reference_ratios

    def _compare(self, title: str, first: str, reference: tuple, second: str,
                 measured: tuple) -> tuple[str, str, str, tuple[float, ...]]:
        """One line: the cycle's cost and the rate of `second` against `first`'s, run after run on the same seed;
        the comparison with its ratios (`COMPARED`)."""
        (rate_a, (p50_a, per_task_a)), (rate_b, (p50_b, per_task_b)) = reference, measured
        figures = [("cycle_ms_p50", p50_a, p50_b, ".1f"), ("cycle_ms_per_task", per_task_a, per_task_b, ".3f"),
                   ("tasks_per_second", rate_a, rate_b, ".1f")]
        self.stdout.write(f"{title}: " + "; ".join(
            f"{name} {first}={a:{form}} {second}={b:{form}} {second}/{first}={b / a if a else 0.0:.3f}"
            for name, a, b, form in figures))
        return title, first, second, tuple(b / a if a else 0.0 for _, a, b, _ in figures)

    def _print(self, report: dict, pending: int, ceiling: float) -> float:
        """Print one run's figures; its tasks per second."""
        durations = sorted(report["durations_ms"])
        wall = report["wall_s"]
        self.stdout.write(
            f"instances={report['instances']} cycles={len(durations)} considered={report['considered']} "
            f"bound={report['bound']} of {pending} pending, still pending={report['pending_left']}"
        )
        if durations:
            self.stdout.write(f"cycle_ms p50={percentile(durations, 50):.1f} p99={percentile(durations, 99):.1f} "
                              f"max={durations[-1]:.1f}")
            self.stdout.write(f"metrics_ms_per_cycle={report['metrics_ms'] / len(durations):.2f} "
                              f"({100 * report['metrics_ms'] / sum(durations):.1f} % of cycle time)")
        binding = report["binding_s"]
        self.stdout.write(f"wall_s={wall:.2f} binding_s={binding:.2f}")
        self.stdout.write(f"peak_rss_mb={report['rss_mb']:.0f} (scheduler processes summed; "
                          f"seeding process {max_rss_mb():.0f})")
        if report["bound"]:
            # CPU, unlike the clock, hardly moves with what else runs on the machine: the same-run comparison of two
            # versions on a busy machine.
            database = report["database_cpu_s"]
            self.stdout.write(
                f"cpu_ms_per_bound_task scheduler={1000 * report['cpu_s'] / report['bound']:.3f} postgres="
                + (f"{1000 * database / report['bound']:.3f}" if database is not None else "unknown")
                + " (the scheduler processes' own CPU and their PostgreSQL sessions')")
            # Counts, not times: the same on a busy machine as on an idle one, and they grow with a bad plan.
            self.stdout.write(f"per_bound_task statements={report['statements'] / report['bound']:.2f} "
                              f"rows_read={report['rows_read'] / report['bound']:.1f} (the cycles' statements; "
                              f"table rows the server read for the scheduler processes)")
        tasks_per_second = report["bound"] / binding if binding else 0.0
        self.stdout.write(f"tasks_per_second={tasks_per_second:.1f} bind_ceiling_per_s={ceiling:.1f} "
                          f"ratio={tasks_per_second / ceiling if ceiling else 0.0:.3f}")
        return tasks_per_second


def _cycle_cost(report: dict) -> tuple[float, float]:
    """The cycle's cost, ms: the median cycle (the first, warming caches, weighs no more than another) and the
    cycle time per task considered."""
    durations = sorted(report["durations_ms"])
    per_task = sum(durations) / report["considered"] if report["considered"] else 0.0
    return (percentile(durations, 50) if durations else 0.0), per_task


def _modes(*allowed: str):
    """An argument type: a comma-separated list of distinct modes among `allowed`."""
    def parse(text: str) -> list[str]:
        modes = text.split(",")
        if any(mode not in allowed for mode in modes) or len(set(modes)) != len(modes):
            raise argparse.ArgumentTypeError(f"expected one or several of {', '.join(allowed)}: {text!r}")
        return modes
    return parse


def _layouts(text: str) -> list[str]:
    from scheduling.replay.simulate import POLICIES

    names = text.split(",")
    if any(name not in POLICIES or name == "random" for name in names) or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"expected layouts from spread, binpack, fgd, fgd-paper: {text!r}")
    return names




def _use_layout(layout: str) -> None:
    """Store the layout policy's plugin settings; fgd gets the seeded tasks as its recent-task window."""
    from scheduling.models import PluginConfig, Task
    from scheduling.plugins import fgd
    from scheduling.replay.simulate import POLICIES
    from scheduling.cache.snapshot_builder import TASK_INFO_FIELDS, task_info_from_row

    for setting in POLICIES[layout]:
        PluginConfig.objects.update_or_create(name=setting.name, defaults={
            "enabled": setting.enabled, "weight": setting.weight, "extra": dict(setting.extra)})
    if any(setting.name == fgd.NAME and setting.enabled for setting in POLICIES[layout]):
        rows = Task.objects.order_by("created_at", "id").values_list(*TASK_INFO_FIELDS)[:fgd.RECENT_WINDOW]
        fgd.record_shapes(task_info_from_row(row) for row in rows)


def _forget_window() -> None:
    from scheduling.plugins import fgd

    fgd.clear_recent_window()


# --- running the scheduler processes -------------------------------------------------------------------------


def _run_instances(database: str, instances: int, seed: int, *, live_updates: bool, metrics: bool,
                   concurrent_cycles: bool, reserve_after: int = RESERVE_NEVER) -> dict:
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(instances + 1)
    results = context.Queue()
    url = database_url(database)
    processes = [
        context.Process(target=_scheduler_process,
                        args=(url, f"bench-{index}", seed + index, live_updates, metrics, concurrent_cycles, ready,
                              results, reserve_after))
        for index in range(instances)
    ]
    for process in processes:
        process.start()
    rows_read_before = rows_read()
    ready.wait()
    started = time.monotonic()
    reports = [results.get() for _ in processes]
    wall = time.monotonic() - started
    for process in processes:
        process.join()
    return {
        # The schedulers' sessions have ended, so their counts are in the server's statistics.
        "rows_read": rows_read() - rows_read_before,
        "statements": sum(report["statements"] for report in reports),
        "instances": instances,
        "wall_s": wall,
        # Until the end of the last cycle that bound a task: what follows is the instances finding nothing more.
        "binding_s": max((report["last_bind_at"] for report in reports if report["last_bind_at"]),
                         default=started) - started,
        "durations_ms": [duration for report in reports for duration in report["durations_ms"]],
        "considered": sum(report["considered"] for report in reports),
        "bound": sum(report["bound"] for report in reports),
        "pending_left": min(report["pending_left"] for report in reports),
        "rss_mb": sum(report["rss_mb"] for report in reports),
        "metrics_ms": sum(report["metrics_ms"] for report in reports),
        "cpu_s": sum(report["cpu_s"] for report in reports),
        "database_cpu_s": (None if any(report["database_cpu_s"] is None for report in reports)
                           else sum(report["database_cpu_s"] for report in reports)),
    }


def _scheduler_process(url: str, instance: str, seed: int, live_updates: bool, metrics: bool,
                       concurrent_cycles: bool, ready, results, reserve_after: int = RESERVE_NEVER) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["HETEROFLOW_RESERVE_AFTER"] = str(reserve_after)
    os.environ["HETEROFLOW_CONCURRENT_CYCLES"] = "true" if concurrent_cycles else "false"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heteroflow_site.settings")
    import django

    django.setup()
    from scheduling import lifecycle
    from scheduling.cycle.collector import freeze_startup
    from scheduling.cycle.run import CYCLE_LIMIT, run_cycle
    from scheduling.diagnostics.attempts import attempts_writer
    from scheduling.models import Task
    from scheduling.signals import task_transitioned

    if not live_updates:
        task_transitioned.disconnect(dispatch_uid=LIVE_TASK_RECEIVER)
    metrics_seconds = _time_cycle_metrics() if metrics else _drop_cycle_metrics()
    rng = random.Random(seed)
    database = connections["default"]
    statements = itertools.count()

    def count(execute, sql, params, many, context):
        next(statements)
        return execute(sql, params, many, context)

    def session_of_this_thread() -> int:
        connection = connections["default"]
        connection.ensure_connection()
        return connection.connection.info.backend_pid

    def count_statements_of_this_thread() -> None:
        connections["default"].execute_wrappers.append(count)

    # The cycles' attempts are written behind, on the writer's session: its statements and CPU count too.
    backends = [session_of_this_thread(), attempts_writer.call(session_of_this_thread)]
    attempts_writer.call(count_statements_of_this_thread)
    freeze_startup()
    ready.wait()
    cpu_started, database_cpu_started = time.process_time(), _sessions_cpu_seconds(backends)
    durations, considered, bound, idle, last_bind_at = [], 0, 0, 0, None

    while True:
        with database.execute_wrapper(count):
            result = run_cycle(instance=instance, rng=rng, attempts_behind=True)
        if result.skipped:
            continue
        durations.append(result.duration_ms)
        considered += result.considered
        bound += result.bound
        if result.bound:
            last_bind_at = time.monotonic()
        idle = idle + 1 if result.bound == 0 else 0
        pending = Task.objects.filter(status=lifecycle.PENDING).count()
        # Done when nothing is pending, or when this instance went a whole pass over the queue binding nothing.
        if pending == 0 or idle >= math.ceil(pending / CYCLE_LIMIT):
            break
    attempts_writer.wait()
    database_cpu = _sessions_cpu_seconds(backends)
    if [session_of_this_thread(), attempts_writer.call(session_of_this_thread)] != backends \
            or database_cpu is None or database_cpu_started is None:
        database_cpu = database_cpu_started = None
    results.put({"durations_ms": durations, "considered": considered, "bound": bound, "pending_left": pending,
                 "last_bind_at": last_bind_at, "metrics_ms": 1000 * sum(metrics_seconds),
                 "statements": next(statements),
                 "rss_mb": max_rss_mb(), "cpu_s": time.process_time() - cpu_started,
                 "database_cpu_s": None if database_cpu is None else database_cpu - database_cpu_started})


def _sessions_cpu_seconds(backends: list[int]) -> float | None:
    """The CPU seconds of these PostgreSQL backends so far; None when one cannot be read."""
    seconds = [process_cpu_seconds(backend) for backend in backends]
    return None if None in seconds else sum(seconds)


def _time_cycle_metrics() -> list[float]:
    """Wrap the cycle's metrics write (one Redis round trip) with a clock; the list it appends its seconds to."""
    from scheduling import metrics as cycle_metrics

    spent: list[float] = []
    record_cycle = cycle_metrics.record_cycle

    def timed(**figures):
        started = time.perf_counter()
        try:
            return record_cycle(**figures)
        finally:
            spent.append(time.perf_counter() - started)

    cycle_metrics.record_cycle = timed
    return spent


def _drop_cycle_metrics() -> list[float]:
    from scheduling import metrics as cycle_metrics

    cycle_metrics.record_cycle = lambda **figures: None
    return []


def _seed_quotas() -> None:
    """design §16.2 for every seeded tenant: a nominal quota of its share of each type's cards (the seeded queue asks
    for less, so the same tasks bind as without quotas), a total cap of all the cards, and one cohort."""
    from django.db.models import Count

    from nodes.models import GPU
    from tenants.models import Cohort, Tenant, TenantGpuQuota

    cards = dict(GPU.objects.values_list("type").annotate(count=Count("id")).order_by())
    cohort = Cohort.objects.create(name="bench")
    tenants = list(Tenant.objects.all())
    Tenant.objects.update(cohort=cohort, gpu_quota=sum(cards.values()))
    TenantGpuQuota.objects.bulk_create(
        TenantGpuQuota(tenant=tenant, gpu_type=gpu_type, nominal=math.ceil(count / len(tenants)))
        for tenant in tenants for gpu_type, count in cards.items())


def _seed_usage(rng: random.Random, order: str, days: int = 90) -> None:
    """Usage records for every seeded tenant, GPU type and task type over the last `days` days, and the queue-sort
    order `order`."""
    from datetime import timedelta

    from django.utils import timezone

    from nodes.models import GPU_TYPES
    from scheduling.models import PluginConfig, TaskType, UsageRecord
    from tenants.models import Tenant

    today = timezone.now().date()
    UsageRecord.objects.bulk_create(
        UsageRecord(tenant_id=tenant_id, day=today - timedelta(days=age), gpu_type=gpu_type, task_type=task_type,
                    card_seconds=rng.uniform(0, 8 * 86400))
        for tenant_id in Tenant.objects.values_list("id", flat=True) for age in range(days)
        for gpu_type in GPU_TYPES for task_type in TaskType.values)
    PluginConfig.objects.update_or_create(name="queue-sort", defaults={"enabled": True, "weight": 0,
                                                                       "extra": {"order": order}})


def _seed_pools(rng: random.Random, *, defrag: bool = False) -> None:
    """design §16.3 on the seeded cluster: taints on some nodes, tolerations on the 8-card tasks and some others;
    the defrag plugin enabled with its default settings when asked."""
    from nodes.models import Node
    from scheduling.models import PluginConfig, Task
    from scheduling.plugins.defrag import SPEC as DEFRAG

    if defrag:
        PluginConfig.objects.update_or_create(name=DEFRAG.name, defaults={
            "enabled": True, "weight": 0, "extra": dict(DEFRAG.default.extra)})

    big = [{"key": "pool", "value": "big", "effect": "NoSchedule"}]
    soft = [{"key": "pool", "value": "shared", "effect": "PreferNoSchedule"}]
    nodes = list(Node.objects.only("id"))
    for node in nodes:
        draw = rng.random()
        node.taints = big if draw < 0.1 else soft if draw < 0.15 else []
    Node.objects.bulk_update(nodes, ["taints"], batch_size=2000)
    tasks = list(Task.objects.only("id", "gpu_required"))
    for task in tasks:
        if task.gpu_required == 8 or rng.random() < 0.2:
            task.tolerations = [{"key": "pool", "operator": "Exists"}]
    Task.objects.bulk_update(tasks, ["tolerations"], batch_size=2000)


# --- synthetic cluster ---------------------------------------------------------------------------------------


def _seed_synthetic(rng: random.Random, node_count: int, pending: int) -> tuple[int, int]:
    from nodes.agent.topology import TOPOLOGY_LABEL
    from nodes.demo_cluster import DEMO_FLEET, REGIONS, topology_label
    from nodes.models import GPU, Node
    from tenants.models import Tenant

    tenants = Tenant.objects.bulk_create(Tenant(name=f"bench-{index}") for index in range(TENANTS))
    models_of: dict[str, list] = {}
    for _, node_model in DEMO_FLEET:
        models_of.setdefault(node_model.gpu_type, []).append(node_model)
    placements = [(region, zone, f"{zone}-r{rack}") for region, zones in REGIONS for zone in zones
                  for rack in range(1, 5)]
    nodes, cards = [], []
    for serial in range(node_count):
        gpu_type = _weighted(rng, GPU_TYPE_WEIGHTS)
        node_model = rng.choice(models_of[gpu_type])
        count = _weighted(rng, CARD_COUNT_WEIGHTS)
        labels = {}
        if gpu_type == "nvidia" and count >= 2 and node_model.nvlink:
            labels[TOPOLOGY_LABEL] = topology_label(replace(node_model, cards=count))
        if rng.random() < 0.3:
            labels.update({"rdma": "true", "rdma-speed": str(rng.choice((100, 200, 400)))})
        elif rng.random() < 0.1:
            labels["rdma"] = "false"
        region, zone, rack = rng.choice(placements)
        status = Node.Status.OFFLINE if rng.random() < 0.02 else Node.Status.ONLINE
        node = Node(
            name=f"bench-{serial:05d}", status=status, gpu_type=gpu_type, gpu_total=count,
            region=region, zone=zone, rack=rack, labels=labels, cpu_cores=node_model.cpu_cores,
            memory_gb=node_model.memory_gb, cpu_percent=round(rng.uniform(2, 60), 1),
            memory_used_mb=int(node_model.memory_gb * 1024 * rng.uniform(0.05, 0.6)),
            dedicated_tenant=tenants[0] if rng.random() < 0.02 else None,
            internal_ip=f"10.{serial // 65536}.{serial // 256 % 256}.{serial % 256}/16",
        )
        nodes.append((node, node_model, count))
    Node.objects.bulk_create([node for node, _, _ in nodes], batch_size=2000)
    for node, node_model, count in nodes:
        for index in range(count):
            cards.append(GPU(node=node, index=index, uuid=f"{node.name}-{index}", type=node_model.gpu_type,
                             model=node_model.model, memory_total_mb=node_model.memory_mb,
                             memory_used_mb=int(node_model.memory_mb * rng.uniform(0, 0.2)),
                             utilization=round(rng.uniform(0, 60), 1), temperature=round(rng.uniform(35, 70), 1),
                             numa=index * 2 // count))
    GPU.objects.bulk_create(cards, batch_size=5000)
    _seed_tasks(rng, tenants, pending, [gpu_type for gpu_type in GPU_TYPE_WEIGHTS])
    return len(nodes), pending


def _seed_tasks(rng: random.Random, tenants, pending: int, gpu_types: list[str]) -> None:
    from scheduling.models import Task, TaskType

    shapes = {1: 50, 2: 10, 4: 5, 8: 2, "fractional": 25, 0: 8}
    tasks = []
    for serial in range(pending):
        shape = _weighted(rng, shapes)
        fields = {"gpu_required": 0, "gpu_memory_mb": 0}
        if shape == "fractional":
            fields["gpu_memory_mb"] = rng.choice((2048, 4096, 8192))
        else:
            fields["gpu_required"] = shape
        labels = {}
        if rng.random() < 0.2:
            labels["zone"] = rng.choice(("cn-north-a", "cn-north-b", "cn-east-a"))
        if shape in (2, 4, 8) and rng.random() < 0.2:
            labels["nvlink"] = "required"
        if rng.random() < 0.05:
            labels["rdma"] = "required"
        task_type = TaskType.INFERENCE if rng.random() < 0.1 else TaskType.BATCH
        tasks.append(Task(
            tenant=rng.choice(tenants), name=f"bench-task-{serial}", type=task_type,
            gpu_type=_weighted(rng, GPU_TYPE_WEIGHTS) if shape != 0 and rng.random() < 0.6 else "",
            priority=rng.randint(0, 100), cpu_cores=rng.choice((1, 2, 4, 8)), memory_mb=rng.choice((2048, 8192)),
            labels=labels, **fields,
        ))
    Task.objects.bulk_create(tasks, batch_size=2000)


def _weighted(rng: random.Random, weights: dict):
    return rng.choices(list(weights), weights=list(weights.values()))[0]


# --- openb trace ---------------------------------------------------------------------------------------------


def _seed_openb(rng: random.Random, node_limit: int, pending: int) -> tuple[int, int]:
    """Nodes and pods of the openb trace (README in data/traces/openb): pods become tasks in creation order."""
    from nodes.models import GPU, Node
    from scheduling.models import Task
    from tenants.models import Tenant

    tenants = Tenant.objects.bulk_create(Tenant(name=f"openb-{index}") for index in range(TENANTS))
    with open(OPENB_DIR / "openb_node_list_gpu_node.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))[:node_limit]
    nodes = [
        Node(name=row["sn"], status=Node.Status.ONLINE, gpu_type="nvidia", gpu_total=int(row["gpu"]),
             cpu_cores=int(row["cpu_milli"]) // 1000, memory_gb=int(row["memory_mib"]) // 1024)
        for row in rows
    ]
    Node.objects.bulk_create(nodes, batch_size=2000)
    GPU.objects.bulk_create(
        (GPU(node=node, index=index, type="nvidia", model=row["model"],
             memory_total_mb=OPENB_MEMORY_MB.get(row["model"], 32768))
         for node, row in zip(nodes, rows) for index in range(int(row["gpu"]))),
        batch_size=5000,
    )
    with open(OPENB_DIR / "openb_pod_list_default.csv", newline="") as handle:
        pods = list(csv.DictReader(handle))[:pending]
    tasks = []
    for pod in pods:
        gpus, milli = int(pod["num_gpu"]), int(pod["gpu_milli"] or 0)
        fields = {"gpu_required": gpus, "gpu_memory_mb": 0}
        if gpus == 1 and 0 < milli < 1000:
            fields = {"gpu_required": 0, "gpu_memory_mb": max(16384 * milli // 1000, 1)}
        labels = {"gpu-model": pod["gpu_spec"]} if pod.get("gpu_spec") else {}
        tasks.append(Task(tenant=rng.choice(tenants), name=pod["name"], cpu_cores=int(pod["cpu_milli"]) / 1000,
                          memory_mb=int(pod["memory_mib"]), labels=labels, **fields))
    Task.objects.bulk_create(tasks, batch_size=2000)
    return len(nodes), len(tasks)
