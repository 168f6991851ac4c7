"""Replay a workload on the production framework (design §15.9) and print placement quality per policy.

    python manage.py replay_trace --policy spread,binpack,fgd [--pods data/traces/openb/openb_pod_list_gpushare40.csv]
    python manage.py replay_trace --from-db --since 24h --policy spread,binpack,fgd --report
    python manage.py replay_trace --dynamic --compress 100 --node-stride 10 --policy binpack,fgd [--tenants FILE]

The workload is an openb-format trace (drawn by the paper's protocol, `TraceReplay`), or with `--from-db` the tasks
submitted to this cluster in the last `--since` on its current nodes (`scheduling.replay.recorded`); both go through
the same `Replay`. Per policy: each seed's allocation ratio when the arrived demand reached 100 % of the GPUs and
at the end, the failed tasks and the fragmentation left against the workload, then mean ± stdev. The last line is
`allocation_at_arrival=<policy>:<mean %>,...` in policy order. `--json` writes every figure and the mean curves,
`--svg` the allocation curves (allocated % against arrived %), `--report` both into the reports folder the plugin
page links. `--dynamic` replays the trace with departures and a waiting queue instead (`scheduling.replay.dynamic`):
per policy the time-weighted allocation, per size class the waiting times and the tasks never placed, and with
`--tenants` each tenant's usage and Jain's index; its last line is `time_weighted_allocation=<policy>:<mean %>,...`.
"""

import copy
import json
import os
import re
import statistics
import time
from argparse import RawDescriptionHelpFormatter
from concurrent.futures import ProcessPoolExecutor
from datetime import timedelta
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from scheduling.framework.snapshot import ClusterSnapshot, SchedulerConfig
from scheduling.plugins.fgd import TargetWorkload
from scheduling.replay.bound import allocation_bound
from scheduling.replay.chart import allocation_chart, dynamic_chart
from scheduling.replay.big_jobs import DefragSettings
from scheduling.replay.dynamic import (
    DEFAULT_HALF_LIFE_SECONDS,
    PRIORITY_ORDER,
    QUEUE_ORDERS,
    DynamicReplay,
    DynamicResult,
    TenantPlan,
    jobs_of,
    multi_card_mix,
)
from scheduling.replay.recorded import recorded_config, recorded_workload
from scheduling.replay.reports import report_write
from scheduling.replay.simulate import POLICIES, Arrival, Replay, SeedResult, TraceReplay, trace_workload
from scheduling.replay.mixes import Mix, mixed_pods
from scheduling.replay.trace import MILLI, TraceError, TraceNode, TracePod, read_nodes, read_pod_times, read_pods

TRACE_DIR = Path(settings.BASE_DIR) / "data" / "traces" / "openb"
DEFAULT_NODES = TRACE_DIR / "openb_node_list_gpu_node.csv"
DEFAULT_PODS = TRACE_DIR / "openb_pod_list_default.csv"
DEFAULT_ARRIVAL = 1.3
# The offline packings `--bound` tries: each places the arrived tasks biggest first.
OFFLINE_POLICIES = ("binpack", "fgd")
DEFAULT_SINCE = "24h"
DEFAULT_DURATION = "1h"
DURATION = re.compile(r"(\d+)([smhd])")
UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}
HELP = """Replay a workload on the production scheduler; print allocation per layout policy.

Without --from-db: tasks drawn from an openb-format trace (--pods) until --arrival x the GPUs of its node list
(--nodes) have arrived, never leaving (design §15.9). --mix draws the pods with other proportions first (more
shared cards, multi-card tasks or GPU-model constraints; scheduling/replay/mixes.py).

With --from-db: the tasks created in the last --since (all tenants, all states), replayed on the cluster's current
nodes (the node table's nodes with their cards, as if online and empty; cordoned nodes left out). Arrival is the
window's submissions in creation order: each task arrives at its creation time with the shape it was submitted
with and is placed at once or fails for good; it leaves after finished - started when it ran and finished, never
when it is still running, and after --default-duration when it never started. Allocation is measured after the
last submission (alloc@end), the curve as the submissions arrive (arrived GPU demand, % of the cluster's GPUs).
Tenant quotas are left out and gang members arrive one by one; seeds only break score ties. Nothing is written to
the database.

With --dynamic: the trace's pods arrive at their creation_time (divided by --compress: arrivals come that many
times as fast, each still runs deletion_time - creation_time) on every --node-stride-th node of the node list; a
task that does not fit waits in queue order (design §15.1) until tasks leaving make room. Printed per policy: the
time-weighted allocation, and per size class the p50/p99 waiting time and the tasks never placed; with --tenants
FILE (pods mapped to tenants and their gpu_quota, see scheduling/replay/dynamic.py) each tenant's mean GPUs held
and Jain's fairness index. Seeds break score ties."""


def _trace(nodes_path: str, pods_path: str, mix: str | None) -> tuple[list[TraceNode], list[TracePod]]:
    """The node list and the pods, mixed by `--mix` (`scheduling.replay.mixes`) when given."""
    nodes, pods = read_nodes(Path(nodes_path)), read_pods(Path(pods_path))
    return nodes, mixed_pods(pods, nodes, Mix.parse(mix)) if mix else pods


def _replay(nodes_path: str, pods_path: str, mix: str | None, policy: str, seed: int, arrival: float) -> SeedResult:
    nodes, pods = _trace(nodes_path, pods_path, mix)
    return TraceReplay(nodes, pods, policy=policy, seed=seed, arrival=arrival, workload=trace_workload(pods)).run()


def _bounds(nodes_path: str, pods_path: str, mix: str | None, seed: int, arrival: float) -> tuple[float, float]:
    """For one seed's arrived tasks: the LP upper bound on any placement's allocation, and the best of the offline
    packings (a placement that exists, so the optimum is at least that)."""
    nodes, pods = _trace(nodes_path, pods_path, mix)
    drawn = TraceReplay(nodes, pods, policy=OFFLINE_POLICIES[0], seed=seed, arrival=arrival)
    upper = allocation_bound(nodes, list(drawn.arrived_pods()))
    # Biggest first (GPU demand, then CPU): the offline packer knows every task before it places any.
    ordered = sorted(drawn.tasks(), key=lambda item: (-item.demand_milli, -item.task.cpu_cores, item.task.id))
    packed = max(TraceReplay(nodes, pods, policy=policy, seed=seed, arrival=arrival, workload=drawn.workload)
                 .run(ordered).allocation_at_arrival for policy in OFFLINE_POLICIES)
    return upper, packed


def _replay_dynamic(nodes_path: str, pods_path: str, node_stride: int, compress: float, tenants_path: str | None,
                    policy: str, seed: int, big_jobs: dict | None = None) -> DynamicResult:
    big_jobs = big_jobs or {}
    nodes, pods = read_nodes(Path(nodes_path))[::node_stride], read_pod_times(Path(pods_path))
    if big_jobs.get("multi_card"):
        pods = multi_card_mix(pods, big_jobs["multi_card"])
    tenants = TenantPlan.read(Path(tenants_path)) if tenants_path else None
    return DynamicReplay(nodes, jobs_of(pods, compress=compress, tenants=tenants), policy=policy, seed=seed,
                         tenants=tenants, reserve_after=big_jobs.get("reserve_after"),
                         defrag=DefragSettings() if big_jobs.get("defrag") else None,
                         queue_order=big_jobs.get("queue_order") or PRIORITY_ORDER,
                         half_life=(big_jobs.get("half_life") or DEFAULT_HALF_LIFE_SECONDS / 3600) * 3600).run()


def _replay_recorded(snapshot: ClusterSnapshot, arrivals: list[Arrival], workload: TargetWorkload,
                     config: SchedulerConfig, policy: str, seed: int) -> SeedResult:
    # Each run changes its snapshot; runs in this process must not see each other's.
    return Replay(copy.deepcopy(snapshot), policy=policy, seed=seed, workload=workload, config=config).run(arrivals)


def parse_duration(option: str, text: str) -> timedelta:
    """`24h`, `90m`, `7d`, `30s`: a whole positive number and a unit."""
    match = DURATION.fullmatch(text.strip())
    if not match or int(match.group(1)) == 0:
        raise CommandError(f"{option}: {text!r} is not a duration; give a whole number and s, m, h or d, "
                           f"e.g. 24h, 90m, 7d")
    return timedelta(**{UNITS[match.group(2)]: int(match.group(1))})


def _mean_stdev(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def mean_curve(results: list[SeedResult], arrival: float) -> list[tuple[float, float]]:
    """Allocated % at each whole arrived %, averaged over the seeds (each seed's curve interpolated there)."""
    grid = np.arange(0, int(round(arrival * 100)) + 1, dtype=float)
    curves = [np.interp(grid, *np.array([(0.0, 0.0), *result.curve]).T) for result in results]
    return [(float(x), round(float(y), 3)) for x, y in zip(grid, np.mean(curves, axis=0))]


class Command(BaseCommand):
    help = HELP

    def create_parser(self, prog_name, subcommand, **kwargs):
        # The help's paragraphs keep their lines.
        return super().create_parser(prog_name, subcommand, formatter_class=RawDescriptionHelpFormatter, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("--nodes", help=f"node list CSV (openb format; default {DEFAULT_NODES.name})")
        parser.add_argument("--pods", help=f"pod list CSV (openb format; default {DEFAULT_PODS.name})")
        parser.add_argument("--from-db", action="store_true",
                            help="replay the tasks submitted to this cluster on its nodes instead of a trace")
        parser.add_argument("--since", help=f"with --from-db: the window of submissions, e.g. 24h, 90m, 7d "
                                            f"(default {DEFAULT_SINCE})")
        parser.add_argument("--default-duration", help=f"with --from-db: how long a task that never started runs "
                                                       f"(default {DEFAULT_DURATION})")
        parser.add_argument("--policy", default="fgd", help=f"comma-separated, from {', '.join(POLICIES)}")
        parser.add_argument("--arrival", type=float,
                            help=f"trace only: arrived GPU demand / cluster GPUs (default {DEFAULT_ARRIVAL})")
        parser.add_argument("--seeds", type=int, default=10, help="seeds 0 … N−1")
        parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                            help="replays run in this many processes at once (default: one per CPU)")
        parser.add_argument("--json", dest="json_path", help="write all figures to this file")
        parser.add_argument("--svg", dest="svg_path", help="write the allocation curves to this SVG file")
        parser.add_argument("--mix", help="trace only: replay a mix of the pods instead, e.g. shared=0.6,multi=0.3,"
                                          "constrained=0.5,seed=1 (scheduling/replay/mixes.py)")
        parser.add_argument("--bound", action="store_true",
                            help="trace only: also an upper bound on any placement's allocation of the same arrived "
                                 "tasks (an LP, SciPy's HiGHS) and an offline packing, and each policy's gap")
        parser.add_argument("--dynamic", action="store_true",
                            help="replay the trace's own arrival and departure times with a waiting queue")
        parser.add_argument("--compress", type=float,
                            help="with --dynamic: arrivals come this many times as fast (default 1)")
        parser.add_argument("--node-stride", type=int,
                            help="with --dynamic: replay on every Nth node of the node list (default 1: all)")
        parser.add_argument("--tenants", help="with --dynamic: a JSON file mapping pods to tenants and their quotas")
        parser.add_argument("--reserve-after", type=float,
                            help="with --dynamic: reservation (design §16.3) for jobs of 2+ cards waiting this many "
                                 "seconds (production: HETEROFLOW_RESERVE_AFTER, 300); default: no reservation")
        parser.add_argument("--defrag", action="store_true",
                            help="with --dynamic and --reserve-after: defrag moves for the reserved job (its default "
                                 "settings; every trace task counts as preemptible batch work)")
        parser.add_argument("--multi-card", type=float,
                            help="with --dynamic: this share of the trace's whole 1-card pods ask 2, 4 or 8 cards "
                                 "instead (a multi-card-heavy mix with the trace's times)")
        parser.add_argument("--queue-order", choices=QUEUE_ORDERS,
                            help="with --dynamic: the waiting queue's order within a priority: arrival (priority, the "
                                 "default), each tenant's dominant share of what it holds now, or its usage decayed "
                                 "with --half-life (fair-share); both over the tenants' nominal (design §17.4)")
        parser.add_argument("--half-life", type=float,
                            help=f"with --queue-order fair-share: hours of replay time (default "
                                 f"{DEFAULT_HALF_LIFE_SECONDS / 3600:g}, HETEROFLOW_FAIR_SHARE_HALF_LIFE's default)")
        parser.add_argument("--report", action="store_true",
                            help="keep the figures and the chart in the reports folder (settings.REPLAY_REPORT_DIR); "
                                 "the plugin page links the latest")

    def handle(self, *args, nodes: str | None, pods: str | None, from_db: bool, since: str | None,
               default_duration: str | None, policy: str, arrival: float | None, seeds: int, jobs: int,
               json_path: str | None, svg_path: str | None, report: bool, dynamic: bool, compress: float | None,
               node_stride: int | None, tenants: str | None, bound: bool, reserve_after: float | None,
               defrag: bool, multi_card: float | None, mix: str | None, queue_order: str | None,
               half_life: float | None, **options):
        policies = [name.strip() for name in policy.split(",") if name.strip()]
        unknown = [name for name in policies if name not in POLICIES]
        if not policies or unknown:
            raise CommandError(f"--policy: unknown {', '.join(unknown) or '(none given)'}; "
                               f"choose from {', '.join(POLICIES)}")
        if seeds < 1 or jobs < 1:
            raise CommandError("--seeds and --jobs must be at least 1")
        for option, value in (("--bound", bound or None), ("--mix", mix)):
            if value is not None and (dynamic or from_db):
                raise CommandError(f"{option} applies to the static trace replay only (not with --dynamic or "
                                   f"--from-db)")
        if dynamic:
            for option, value in (("--from-db", from_db or None), ("--arrival", arrival), ("--since", since),
                                  ("--default-duration", default_duration)):
                if value is not None:
                    raise CommandError(f"{option} does not apply with --dynamic (it replays the trace's own times)")
            compress = 1.0 if compress is None else compress
            node_stride = 1 if node_stride is None else node_stride
            if not 0 < compress <= 1e6 or node_stride < 1:
                raise CommandError("--compress must be in (0, 1000000] and --node-stride at least 1")
            if reserve_after is not None and reserve_after < 0 or defrag and reserve_after is None:
                raise CommandError("--reserve-after must be at least 0; --defrag needs --reserve-after")
            if multi_card is not None and not 0 <= multi_card <= 1:
                raise CommandError("--multi-card must be in [0, 1]")
            if half_life is not None and (half_life <= 0 or queue_order != "fair-share"):
                raise CommandError("--half-life must be positive, and applies with --queue-order fair-share only")
            if queue_order not in (None, PRIORITY_ORDER) and tenants is None:
                raise CommandError(f"--queue-order {queue_order} needs --tenants")
            big_jobs = {"reserve_after": reserve_after, "defrag": defrag, "multi_card": multi_card,
                        "queue_order": queue_order, "half_life": half_life}
            figures = self._replay_dynamic(nodes=nodes or str(DEFAULT_NODES), pods=pods or str(DEFAULT_PODS),
                                           compress=compress, node_stride=node_stride, tenants=tenants,
                                           policies=policies, seeds=seeds, jobs=jobs, big_jobs=big_jobs)
            self._keep(figures, dynamic_chart(figures), json_path=json_path, svg_path=svg_path, report=report)
            means = ",".join(f"{name}:{figures['policies'][name]['time_weighted_allocation']['mean']:.2f}"
                             for name in policies)
            self.stdout.write(f"time_weighted_allocation={means}")
            return
        for option, value in (("--compress", compress), ("--node-stride", node_stride), ("--tenants", tenants),
                              ("--reserve-after", reserve_after), ("--defrag", defrag or None),
                              ("--multi-card", multi_card), ("--queue-order", queue_order),
                              ("--half-life", half_life)):
            if value is not None:
                raise CommandError(f"{option} applies only with --dynamic")
        if from_db:
            for option, value in (("--nodes", nodes), ("--pods", pods), ("--arrival", arrival)):
                if value is not None:
                    raise CommandError(f"{option} reads a trace; it does not apply with --from-db")
            window = DEFAULT_SINCE if since is None else since
            default_duration = DEFAULT_DURATION if default_duration is None else default_duration
            figures, curves = self._replay_recorded(
                window=window, length=parse_duration("--since", window), default_duration=default_duration,
                duration=parse_duration("--default-duration", default_duration),
                policies=policies, seeds=seeds, jobs=jobs)
        else:
            for option, value in (("--since", since), ("--default-duration", default_duration)):
                if value is not None:
                    raise CommandError(f"{option} applies only with --from-db")
            arrival = DEFAULT_ARRIVAL if arrival is None else arrival
            if not 0 < arrival <= 10:
                raise CommandError("--arrival must be in (0, 10]")
            figures, curves = self._replay_trace(nodes=nodes or str(DEFAULT_NODES), pods=pods or str(DEFAULT_PODS),
                                                 mix=mix, arrival=arrival, policies=policies, seeds=seeds, jobs=jobs)
            if bound:
                self._bound(figures, nodes=nodes or str(DEFAULT_NODES), pods=pods or str(DEFAULT_PODS), mix=mix,
                            arrival=arrival, seeds=seeds, jobs=jobs)
        self._keep(figures, allocation_chart(curves, arrival=figures["arrival"]), json_path=json_path,
                   svg_path=svg_path, report=report)
        means = ",".join(f"{name}:{figures['policies'][name]['allocation_at_arrival']['mean']:.2f}"
                         for name in policies)
        self.stdout.write(f"allocation_at_arrival={means}")

    def _bound(self, figures: dict, *, nodes: str, pods: str, mix: str | None, arrival: float, seeds: int,
               jobs: int) -> None:
        """Add the bound, the offline packing and each policy's gap to `figures`, and print them."""
        results = self._results(lambda pool, _, seed: pool.submit(_bounds, nodes, pods, mix, seed, arrival),
                                policies=["bound"], seeds=seeds, jobs=jobs)["bound"]
        upper, packed = ([result[index] for result in results] for index in (0, 1))
        figures["bound"] = {"upper": _figure(upper), "offline_packing": _figure(packed),
                            "per_seed": [{"seed": seed, "upper": up, "offline_packing": off}
                                         for seed, (up, off) in enumerate(results)]}
        self.stdout.write(f"\nbound (LP upper bound on any placement of each seed's arrived tasks) "
                          f"{_shown(upper)}; offline packing (biggest first, best of {', '.join(OFFLINE_POLICIES)}: "
                          f"the optimum is at least this) {_shown(packed)}")
        for name, summary in figures["policies"].items():
            reached = [run["allocation_at_arrival"] for run in summary["runs"]]
            gaps = [up - value for up, value in zip(upper, reached)]
            short = [off - value for off, value in zip(packed, reached)]
            summary["gap_to_bound"], summary["below_offline_packing"] = _figure(gaps), _figure(short)
            self.stdout.write(f"  {name}: gap to the bound {_shown(gaps)} points; below the offline packing "
                              f"{_shown(short)} points")

    def _keep(self, figures: dict, chart: str, *, json_path: str | None, svg_path: str | None,
              report: bool) -> None:
        if json_path:
            Path(json_path).write_text(json.dumps(figures, indent=1))
        if svg_path:
            Path(svg_path).write_text(chart)
        if report:
            kept = report_write(figures=figures, chart=chart, made_at=timezone.now())
            self.stdout.write(f"report: {kept} (and {kept.with_suffix('.json').name})")

    def _replay_dynamic(self, *, nodes: str, pods: str, compress: float, node_stride: int, tenants: str | None,
                        policies: list[str], seeds: int, jobs: int, big_jobs: dict) -> dict:
        try:
            trace_nodes, trace_pods = read_nodes(Path(nodes))[::node_stride], read_pod_times(Path(pods))
            plan = TenantPlan.read(Path(tenants)) if tenants else None
            if plan is not None:
                plan.assign(trace_pods)
        except TraceError as exc:
            raise CommandError(str(exc)) from exc
        gpus = sum(node.gpus for node in trace_nodes)
        self.stdout.write(f"dynamic replay of {Path(pods).name}: {len(trace_pods)} pods; every {node_stride}. node of "
                          f"{Path(nodes).name}: {len(trace_nodes)} nodes, {gpus} GPUs; arrivals compressed "
                          f"{compress:g}x; {seeds} seeds (tie-breaks)"
                          + (f"; tenants {', '.join(plan.names)}" if plan else "")
                          + "".join(f"; {key}" if value is True else f"; {key.replace('_', '-')} {value}"
                                    if isinstance(value, str) else f"; {key.replace('_', '-')} {value:g}"
                                    for key, value in big_jobs.items() if value))
        figures = {"source": "trace", "mode": "dynamic", "nodes": nodes, "pods": pods, "gpus": gpus,
                   "node_stride": node_stride, "compress": compress, "tenants_file": tenants, **big_jobs}
        started = time.perf_counter()
        results = self._results(lambda pool, name, seed: pool.submit(
            _replay_dynamic, nodes, pods, node_stride, compress, tenants, name, seed, big_jobs),
            policies=policies, seeds=seeds, jobs=jobs)
        elapsed = time.perf_counter() - started
        figures.update(seeds=seeds, seconds=round(elapsed, 1),
                       policies={name: self._print_dynamic(name, results[name]) for name in policies})
        runs = len(policies) * seeds
        self.stdout.write(f"{runs} replays in {elapsed:.1f} s ({elapsed / runs:.1f} s each, {jobs} job(s))")
        return figures

    def _print_dynamic(self, name: str, results: list[DynamicResult]) -> dict:
        self.stdout.write(f"\n{name}")
        allocation = _mean_stdev([result.time_weighted_allocation for result in results])
        never = _mean_stdev([float(result.never_placed) for result in results])
        window = results[0].window
        self.stdout.write(f"  time-weighted allocation {allocation[0]:.2f} ± {allocation[1]:.2f} % "
                          f"(window {window[0] / 3600:.1f} h → {window[1] / 3600:.1f} h); never placed "
                          f"{never[0]:.1f} ± {never[1]:.1f} of {results[0].tasks}")
        self.stdout.write(f"  {'size class':<12} {'tasks':>6} {'never placed':>14} {'wait p50 s':>16} "
                          f"{'wait p99 s':>18}")
        classes = {}
        for size in results[0].classes:
            cells = {}
            for key in ("never_placed", "wait_p50", "wait_p99"):
                values = [result.classes[size][key] for result in results if result.classes[size][key] is not None]
                cells[key] = dict(zip(("mean", "stdev"), map(lambda v: round(v, 3), _mean_stdev(values)))) \
                    if values else None
            classes[size] = {"tasks": results[0].classes[size]["tasks"], **cells}
            shown = {key: f"{cell['mean']:.0f} ± {cell['stdev']:.0f}" if cell else "-" for key, cell in cells.items()}
            self.stdout.write(f"  {size:<12} {classes[size]['tasks']:>6} {shown['never_placed']:>14} "
                              f"{shown['wait_p50']:>16} {shown['wait_p99']:>18}")
        if results[0].reservations:
            moved = _mean_stdev([result.evictions_per_hour for result in results])
            self.stdout.write(f"  reserved jobs {_shown([result.reservations for result in results])}; tasks moved "
                              f"{_shown([result.moves for result in results])}; evictions per hour {moved[0]:.2f} "
                              f"± {moved[1]:.2f}")
        summary = {"runs": [vars(result) for result in results],
                   "time_weighted_allocation": {"mean": round(allocation[0], 3), "stdev": round(allocation[1], 3)},
                   "never_placed": {"mean": round(never[0], 3), "stdev": round(never[1], 3)}, "classes": classes,
                   "curve": [(hours, round(float(np.mean([result.curve[index][1] for result in results])), 3))
                             for index, (hours, _) in enumerate(results[0].curve)]}
        if results[0].reservations:
            for key in ("reservations", "moves", "evictions_per_hour"):
                summary[key] = _figure([float(getattr(result, key)) for result in results])
        if results[0].tenants:
            summary["tenants"] = {}
            for tenant in results[0].tenants:
                mean = _mean_stdev([result.tenants[tenant]["mean_gpus"] for result in results])
                summary["tenants"][tenant] = {"mean_gpus": {"mean": round(mean[0], 3), "stdev": round(mean[1], 3)}}
                line = f"  tenant {tenant}: {mean[0]:.2f} ± {mean[1]:.2f} GPUs held on average"
                for key in ("within_nominal_wait_p50", "within_nominal_wait_p99"):
                    values = [result.tenants[tenant][key] for result in results if key in result.tenants[tenant]]
                    if values:
                        wait = _mean_stdev(values)
                        summary["tenants"][tenant][key] = {"mean": round(wait[0], 1), "stdev": round(wait[1], 1)}
                        line += f"; {key.removeprefix('within_nominal_').replace('_', ' ')} within nominal " \
                                f"{wait[0]:.0f} ± {wait[1]:.0f} s"
                self.stdout.write(line)
            for key, label in (("jain", "Jain's index"), ("jain_second_half", "Jain's index, second half")):
                jain = _mean_stdev([getattr(result, key) for result in results if getattr(result, key) is not None]
                                   or [0.0])
                summary[key] = {"mean": round(jain[0], 4), "stdev": round(jain[1], 4)}
                self.stdout.write(f"  {label} {jain[0]:.4f} ± {jain[1]:.4f}")
            evicted = _mean_stdev([float(result.evicted) for result in results])
            summary["evicted"] = {"mean": round(evicted[0], 1), "stdev": round(evicted[1], 1)}
            self.stdout.write(f"  borrowed tasks evicted by reclaims {evicted[0]:.1f} ± {evicted[1]:.1f}")
        return summary

    def _replay_trace(self, *, nodes: str, pods: str, mix: str | None, arrival: float, policies: list[str],
                      seeds: int, jobs: int) -> tuple[dict, dict]:
        try:
            trace_nodes, trace_pods = _trace(nodes, pods, mix)
        except TraceError as exc:
            raise CommandError(str(exc)) from exc
        gpus = sum(node.gpus for node in trace_nodes)
        mixed = f" mixed {Mix.parse(mix).label()}" if mix else ""
        self.stdout.write(f"trace {Path(pods).name}{mixed}: {len(trace_pods)} pods; {Path(nodes).name}: "
                          f"{len(trace_nodes)} nodes, {gpus} GPUs; arrival {arrival * 100:g} %; {seeds} seeds")

        figures = {"source": "trace", "nodes": nodes, "pods": pods, "gpus": gpus, "arrival": arrival}
        if mix:
            figures["mix"] = Mix.parse(mix).label()
        return self._run(figures, lambda pool, name, seed: pool.submit(_replay, nodes, pods, mix, name, seed,
                                                                       arrival),
                         policies=policies, seeds=seeds, jobs=jobs, at_arrival=f"alloc@{arrival * 100:g}%")

    def _replay_recorded(self, *, window: str, length: timedelta, default_duration: str, duration: timedelta,
                         policies: list[str], seeds: int, jobs: int) -> tuple[dict, dict]:
        until = timezone.now()
        workload = recorded_workload(since=until - length, until=until, default_duration=duration)
        if not workload.arrivals:
            raise CommandError(f"no tasks were created in the last {window} ({_moment(workload.since)} → "
                               f"{_moment(until)}): nothing to replay; try a longer --since")
        gpus = sum(len(node.cards) for node in workload.snapshot.nodes)
        if not gpus:
            raise CommandError("no schedulable node with GPUs in the node table: nothing to replay on")
        arrival = sum(item.demand_milli for item in workload.arrivals) / (gpus * MILLI)
        self.stdout.write(
            f"tasks created {_moment(workload.since)} → {_moment(until)} (last {window}): {len(workload.arrivals)} "
            f"tasks ({workload.finished} finished, {workload.still_running} still running, {workload.never_started} "
            f"never started: {default_duration} each); {len(workload.snapshot.nodes)} nodes, {gpus} GPUs; "
            f"arrived demand {arrival * 100:.1f} % of the GPUs; {seeds} seeds (tie-breaks)")
        figures = {"source": "database",
                   "window": {"length": window, "since": workload.since.isoformat(), "until": until.isoformat()},
                   "tasks": len(workload.arrivals), "finished": workload.finished,
                   "still_running": workload.still_running, "never_started": workload.never_started,
                   "default_duration": default_duration,
                   "node_count": len(workload.snapshot.nodes), "gpus": gpus, "arrival": round(arrival, 4)}
        target = TargetWorkload.from_tasks(workload.tasks)
        config = recorded_config()
        return self._run(figures, lambda pool, name, seed: pool.submit(
            _replay_recorded, workload.snapshot, workload.arrivals, target, config, name, seed),
            policies=policies, seeds=seeds, jobs=jobs, at_arrival="alloc@end")

    def _run(self, figures: dict, submit, *, policies: list[str], seeds: int, jobs: int,
             at_arrival: str) -> tuple[dict, dict]:
        """Every policy × seed, in `jobs` processes; the figures (with each policy's) and the mean curves."""
        started = time.perf_counter()
        runs = [(name, seed) for name in policies for seed in range(seeds)]
        results = self._results(submit, policies=policies, seeds=seeds, jobs=jobs)
        elapsed = time.perf_counter() - started
        figures = {**figures, "seeds": seeds, "seconds": round(elapsed, 1), "policies": {}}
        for name in policies:
            figures["policies"][name] = self._print_policy(name, results[name], figures["arrival"], at_arrival)
        self.stdout.write(f"{len(runs)} replays in {elapsed:.1f} s ({elapsed / len(runs):.1f} s each, {jobs} job(s))")
        return figures, {name: figures["policies"][name]["curve"] for name in policies}

    @staticmethod
    def _results(submit, *, policies: list[str], seeds: int, jobs: int) -> dict[str, list]:
        """Every policy × seed, in `jobs` processes: each policy's results in seed order."""
        runs = [(name, seed) for name in policies for seed in range(seeds)]
        with ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else _InProcess() as pool:
            futures = [submit(pool, name, seed) for name, seed in runs]
            results: dict[str, list] = {name: [] for name in policies}
            for (name, _), future in zip(runs, futures):
                results[name].append(future.result())
        return results

    def _print_policy(self, name: str, results: list[SeedResult], arrival: float, at_arrival: str) -> dict:
        self.stdout.write(f"\n{name}")
        self.stdout.write(f"  {'seed':>4}  {'alloc@100%':>10}  {at_arrival:>10}  {'tasks':>6}  {'failed':>6}  "
                          f"{'failed GPUs':>11}  {'frag GPUs':>9}  {'frag %':>6}")
        for result in results:
            full = f"{result.allocation_at_full:.2f}" if result.allocation_at_full is not None else "-"
            self.stdout.write(
                f"  {result.seed:>4}  {full:>10}  {result.allocation_at_arrival:>10.2f}  {result.arrived_tasks:>6}  "
                f"{result.failed_tasks:>6}  {result.failed_gpu_demand:>11.1f}  {result.fragmentation:>9.1f}  "
                f"{result.fragmentation_percent:>6.1f}")
        summary: dict = {"runs": [_as_dict(result) for result in results], "curve": mean_curve(results, arrival)}
        figures = {
            "allocation_at_full": [r.allocation_at_full for r in results if r.allocation_at_full is not None],
            "allocation_at_arrival": [r.allocation_at_arrival for r in results],
            "failed_tasks": [r.failed_tasks for r in results],
            "fragmentation": [r.fragmentation for r in results],
        }
        cells = []
        for key, values in figures.items():
            if values:
                mean, stdev = _mean_stdev([float(value) for value in values])
                summary[key] = {"mean": round(mean, 3), "stdev": round(stdev, 3)}
                cells.append(f"{mean:.2f} ± {stdev:.2f}")
            else:
                summary[key] = None
                cells.append("-")
        full, final, failed, fragmented = cells
        self.stdout.write(f"  mean  alloc@100% {full}  {at_arrival} {final}  failed {failed}  frag GPUs {fragmented}")
        return summary


def _figure(values: list[float]) -> dict:
    mean, stdev = _mean_stdev(values)
    return {"mean": round(mean, 3), "stdev": round(stdev, 3)}


def _shown(values: list[float]) -> str:
    mean, stdev = _mean_stdev(values)
    return f"{mean:.2f} ± {stdev:.2f}"


def _moment(moment) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"



def _as_dict(result: SeedResult) -> dict:
    return {"seed": result.seed, "allocation_at_full": result.allocation_at_full,
            "allocation_at_arrival": result.allocation_at_arrival, "arrived_tasks": result.arrived_tasks,
            "failed_tasks": result.failed_tasks, "failed_gpu_demand": result.failed_gpu_demand,
            "fragmentation": result.fragmentation, "idle_gpus": result.idle_gpus}


class _InProcess:
    """`--jobs 1`: the executor interface, run here (no process start-up, and profilers see the replay)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return False

    def submit(self, function, *args):
        return _Done(function(*args))


class _Done:
    def __init__(self, value):
        self._value = value

    def result(self):
        return self._value
