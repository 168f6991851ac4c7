"""Replay an openb-format trace on the production framework (SPEC §15.9) and print placement quality per policy.

    python manage.py replay_trace --policy spread,binpack,fgd [--pods data/traces/openb/openb_pod_list_gpushare40.csv]

Per policy: each seed's allocation ratio when the arrived demand reached 100 % of the GPUs and at `--arrival`, the
failed tasks and the fragmentation left against the trace's workload, then mean ± stdev. The last line is
`allocation_at_arrival=<policy>:<mean %>,...` in policy order. `--json` writes every figure and the mean curves,
`--svg` the allocation curves (allocated % against arrived %).
"""

import json
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduling.replay.chart import allocation_chart
from scheduling.replay.simulate import POLICIES, Replay, SeedResult, trace_workload
from scheduling.replay.trace import TraceError, read_nodes, read_pods

TRACE_DIR = Path(settings.BASE_DIR) / "data" / "traces" / "openb"
DEFAULT_NODES = TRACE_DIR / "openb_node_list_gpu_node.csv"
DEFAULT_PODS = TRACE_DIR / "openb_pod_list_default.csv"


def _replay(nodes_path: str, pods_path: str, policy: str, seed: int, arrival: float) -> SeedResult:
    nodes, pods = read_nodes(Path(nodes_path)), read_pods(Path(pods_path))
    return Replay(nodes, pods, policy=policy, seed=seed, arrival=arrival, workload=trace_workload(pods)).run()


def _mean_stdev(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def mean_curve(results: list[SeedResult], arrival: float) -> list[tuple[float, float]]:
    """Allocated % at each whole arrived %, averaged over the seeds (each seed's curve interpolated there)."""
    grid = np.arange(0, int(round(arrival * 100)) + 1, dtype=float)
    curves = [np.interp(grid, *np.array([(0.0, 0.0), *result.curve]).T) for result in results]
    return [(float(x), round(float(y), 3)) for x, y in zip(grid, np.mean(curves, axis=0))]


class Command(BaseCommand):
    help = "Replay a trace in the openb format on the production scheduler; print allocation per layout policy."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", default=str(DEFAULT_NODES), help="node list CSV (openb format)")
        parser.add_argument("--pods", default=str(DEFAULT_PODS), help="pod list CSV (openb format)")
        parser.add_argument("--policy", default="fgd", help=f"comma-separated, from {', '.join(POLICIES)}")
        parser.add_argument("--arrival", type=float, default=1.3, help="arrived GPU demand / cluster GPUs")
        parser.add_argument("--seeds", type=int, default=10, help="seeds 0 … N−1")
        parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                            help="replays run in this many processes at once (default: one per CPU)")
        parser.add_argument("--json", dest="json_path", help="write all figures to this file")
        parser.add_argument("--svg", dest="svg_path", help="write the allocation curves to this SVG file")

    def handle(self, *args, nodes: str, pods: str, policy: str, arrival: float, seeds: int, jobs: int,
               json_path: str | None, svg_path: str | None, **options):
        policies = [name.strip() for name in policy.split(",") if name.strip()]
        unknown = [name for name in policies if name not in POLICIES]
        if not policies or unknown:
            raise CommandError(f"--policy: unknown {', '.join(unknown) or '(none given)'}; "
                               f"choose from {', '.join(POLICIES)}")
        if not 0 < arrival <= 10:
            raise CommandError("--arrival must be in (0, 10]")
        if seeds < 1 or jobs < 1:
            raise CommandError("--seeds and --jobs must be at least 1")
        try:
            trace_nodes, trace_pods = read_nodes(Path(nodes)), read_pods(Path(pods))
        except TraceError as exc:
            raise CommandError(str(exc)) from exc
        gpus = sum(node.gpus for node in trace_nodes)
        self.stdout.write(f"trace {Path(pods).name}: {len(trace_pods)} pods; {Path(nodes).name}: "
                          f"{len(trace_nodes)} nodes, {gpus} GPUs; arrival {arrival * 100:g} %; {seeds} seeds")

        started = time.perf_counter()
        runs = [(name, seed) for name in policies for seed in range(seeds)]
        with ProcessPoolExecutor(max_workers=jobs) if jobs > 1 else _InProcess() as pool:
            futures = [pool.submit(_replay, nodes, pods, name, seed, arrival) for name, seed in runs]
            results: dict[str, list[SeedResult]] = {name: [] for name in policies}
            for (name, _), future in zip(runs, futures):
                results[name].append(future.result())
        elapsed = time.perf_counter() - started

        report = {"nodes": nodes, "pods": pods, "gpus": gpus, "arrival": arrival, "seeds": seeds,
                  "seconds": round(elapsed, 1), "policies": {}}
        for name in policies:
            report["policies"][name] = self._print_policy(name, results[name], arrival)
        self.stdout.write(f"{len(runs)} replays in {elapsed:.1f} s ({elapsed / len(runs):.1f} s each, {jobs} job(s))")
        if json_path:
            Path(json_path).write_text(json.dumps(report, indent=1))
        if svg_path:
            Path(svg_path).write_text(allocation_chart(
                {name: report["policies"][name]["curve"] for name in policies}, arrival=arrival))
        means = ",".join(f"{name}:{report['policies'][name]['allocation_at_arrival']['mean']:.2f}"
                         for name in policies)
        self.stdout.write(f"allocation_at_arrival={means}")

    def _print_policy(self, name: str, results: list[SeedResult], arrival: float) -> dict:
        at_arrival = f"alloc@{arrival * 100:g}%"
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
