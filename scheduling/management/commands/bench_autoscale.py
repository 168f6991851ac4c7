"""What the autoscaler (design §17.2) saves and costs over a day, in a throwaway database on nodes of the demo fleet:
an inference group autoscaled on `requests_per_second` serves a day-shaped load (night trough, morning ramp,
afternoon peak, evening fall, with noise and a short burst), on a simulated clock so that a day takes about a minute.
Every 15 s of simulated time the real autoscaler tick runs (`autoscale_groups`), the real scheduling cycle places
what it created, replicas start serving `--start-up` seconds after they are placed (loading the model), stopping
ones are gone by the next tick, and each serving replica reports an even share of the load through the heartbeat's
service (as the simulated runtime's stand-ins do).

Prints the replicas over the day (hourly), the SLO minutes violated (the metric per ready replica above
target × 1.2, or no replica ready), the scale decisions, and the GPU-hours used against a group held at its
maximum size all day (which never violates the SLO while the load stays below max × target × 1.2).
"""

import math
import random
import time
from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from scheduling import lifecycle
from scheduling.bench.database import throwaway_database
from scheduling.cycle.run import run_cycle
from scheduling.groups.autoscale import autoscale_groups
from scheduling.groups.autoscale_rule import TICK_SECONDS
from scheduling.groups.replica_metrics import replica_metrics_apply
from scheduling.groups.services import task_group_create
from scheduling.models import GroupEvent, Task, TaskGroup
from scheduling.services.task_transition import task_transition
from scheduling.soak.cluster import seed_nodes
from tenants.models import Tenant

SLO_FACTOR = 1.2
DAY_SECONDS = 24 * 3600


def day_load(seconds: float, *, trough: float, peak: float, rng: random.Random) -> float:
    """Requests per second at `seconds` after midnight: a trough at 04:00, the peak at 15:00 (a raised cosine
    between them), ±5 % noise, and a 20-minute burst of +60 % at 11:00."""
    hour = seconds / 3600
    # 0 at 04:00, 1 at 15:00, back to 0 at 04:00 the next day (11 h up, 13 h down).
    phase = (hour - 4) % 24
    shape = (1 - math.cos(math.pi * phase / 11)) / 2 if phase <= 11 else (1 + math.cos(math.pi * (phase - 11) / 13)) / 2
    load = trough + (peak - trough) * shape
    if 11 <= hour < 11 + 20 / 60:
        load *= 1.6
    return max(load * rng.uniform(0.95, 1.05), 0.0)


class Command(BaseCommand):
    help = "Drive a day-shaped load through the autoscaler on demo nodes; print replicas, SLO minutes and GPU-hours."

    def add_arguments(self, parser):
        parser.add_argument("--hours", type=float, default=24.0)
        parser.add_argument("--target", type=float, default=50.0, help="requests per second per replica")
        parser.add_argument("--min", dest="min_replicas", type=int, default=1)
        parser.add_argument("--max", dest="max_replicas", type=int, default=10)
        parser.add_argument("--trough", type=float, default=40.0, help="requests per second at 04:00")
        parser.add_argument("--peak", type=float, default=380.0, help="requests per second at 15:00")
        parser.add_argument("--gpus-per-replica", type=int, default=1)
        parser.add_argument("--start-up", type=float, default=60.0,
                            help="simulated seconds from placement until a replica serves")
        parser.add_argument("--scale-down-delay", type=int, default=300)
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args, **options):
        wall = time.monotonic()
        with throwaway_database():
            figures = self._day(**options)
        figures["wall_seconds"] = time.monotonic() - wall
        self._print(figures, options)

    def _day(self, *, hours, target, min_replicas, max_replicas, trough, peak, gpus_per_replica, start_up, scale_down_delay, seed,
             **options) -> dict:
        seed_nodes(5)  # the demo fleet's five A100 nodes: 40 cards
        tenant = Tenant.objects.create(name="bench-autoscale")
        spec = {"min": min_replicas, "max": max_replicas, "metric": "requests_per_second", "target": target,
                "scale_down_delay_seconds": scale_down_delay}
        group = task_group_create(tenant=tenant, name="chat", type="inference", world_size=1,
                                  gpus_per_worker=gpus_per_replica, image="vllm:1", replicas=min_replicas,
                                  autoscale=spec)
        run_cycle()  # its first `min` replicas
        rng = random.Random(seed)
        # The simulated clock ends at the wall clock's now, so every stamp the services take from the real clock
        # (a bind, a transition) is later than the simulation's and nothing reads as coming from the future.
        steps = int(hours * 3600 // TICK_SECONDS)
        start = timezone.now() - timedelta(seconds=steps * TICK_SECONDS)
        placed_at: dict[int, float] = {}
        hourly, violated_ticks, gpu_seconds, peak_ready = [], 0, 0.0, 0
        for step in range(steps):
            seconds = step * TICK_SECONDS
            now = start + timedelta(seconds=seconds)
            load = day_load(seconds % DAY_SECONDS, trough=trough, peak=peak, rng=rng)
            members = self._agents(group, placed_at, seconds, start_up)
            serving = [(task_id, node_id) for task_id, status, node_id in members if status == lifecycle.RUNNING]
            by_node: dict[int, list[dict]] = {}
            for task_id, node_id in serving:
                by_node.setdefault(node_id, []).append({"task": task_id, "value": load / len(serving)})
            for node_id, reports in by_node.items():
                replica_metrics_apply(node_id=node_id, at=now, reports=reports)
            per_replica = load / len(serving) if serving else math.inf
            violated_ticks += per_replica > target * SLO_FACTOR
            # What held cards during this tick's 15 s (the decision below takes effect from the next one).
            holding = sum(1 for _, status, _ in members if status in lifecycle.ACTIVE_STATES)
            gpu_seconds += holding * gpus_per_replica * TICK_SECONDS
            # 40 cards for at most `max` replicas: a cycle places every replica a scale-up created at once.
            if autoscale_groups(now=now).scaled:
                run_cycle()
            peak_ready = max(peak_ready, len(serving))
            if seconds % 3600 == 0:
                desired = TaskGroup.objects.values_list("replicas", flat=True).get(id=group.id)
                hourly.append((seconds / 3600, load, desired, len(serving), per_replica))
        decisions = GroupEvent.objects.filter(group=group, kind=GroupEvent.Kind.AUTOSCALE)
        return {
            "hourly": hourly, "slo_minutes": violated_ticks * TICK_SECONDS / 60,
            "gpu_hours": gpu_seconds / 3600, "fixed_gpu_hours": max_replicas * gpus_per_replica * steps * TICK_SECONDS / 3600,
            "ups": sum(1 for event in decisions if event.figures.get("to", 0) > event.figures.get("from", 0)),
            "downs": sum(1 for event in decisions if event.figures.get("to", 0) < event.figures.get("from", 0)),
            "ticks": steps, "peak_ready": peak_ready,
        }

    @staticmethod
    def _agents(group: TaskGroup, placed_at: dict[int, float], seconds: float,
                start_up: float) -> list[tuple[int, str, int | None]]:
        """What the node agents would have done since the last tick: start placed replicas once loaded, finish
        the stopping ones. Returns the group's live members as they are then: (id, status, node)."""
        members = []
        for task_id, status, node_id in (Task.objects.filter(group=group, status__in=lifecycle.ACTIVE_STATES)
                                         .values_list("id", "status", "node_id")):
            if status == lifecycle.SCHEDULED:
                placed_at.setdefault(task_id, seconds)
                if seconds - placed_at[task_id] >= start_up and task_transition(
                        task_id, lifecycle.SCHEDULED, lifecycle.RUNNING):
                    status = lifecycle.RUNNING
            elif status == lifecycle.STOPPING:
                task_transition(task_id, lifecycle.STOPPING, lifecycle.STOPPED, reason="stopped")
                continue
            members.append((task_id, status, node_id))
        return members

    def _print(self, figures: dict, options: dict) -> None:
        out = self.stdout.write
        out(f"autoscaler over {options['hours']:g} h of day-shaped load (trough {options['trough']:g}, peak "
            f"{options['peak']:g} rps, burst +60 % at 11:00), target {options['target']:g} rps per replica, "
            f"[{options['min_replicas']}, {options['max_replicas']}] replicas, {options['start_up']:g} s start-up, scale-down delay "
            f"{options['scale_down_delay']} s, {figures['ticks']} ticks")
        out(f"{'hour':>5} {'load rps':>9} {'desired':>8} {'ready':>6} {'rps/replica':>12}")
        for hour, load, desired, ready, per_replica in figures["hourly"]:
            shown = "—" if math.isinf(per_replica) else f"{per_replica:.1f}"
            out(f"{hour:5.0f} {load:9.1f} {desired:8d} {ready:6d} {shown:>12}")
        saved = 1 - figures["gpu_hours"] / figures["fixed_gpu_hours"] if figures["fixed_gpu_hours"] else 0.0
        out(f"scale-ups {figures['ups']}, scale-downs {figures['downs']}, most replicas ready {figures['peak_ready']}")
        out(f"SLO (rps per ready replica > target × {SLO_FACTOR:g}) violated: {figures['slo_minutes']:.1f} min")
        out(f"GPU-hours: autoscaled {figures['gpu_hours']:.1f} vs fixed {options['max_replicas']}-replica group "
            f"{figures['fixed_gpu_hours']:.1f} ({saved:.0%} saved)")
        out(f"wall time {figures['wall_seconds']:.1f} s")
