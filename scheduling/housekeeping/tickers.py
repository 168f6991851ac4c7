"""The functions of the periodic jobs of design §4, §11 and §15, each returning one line on what it did.

Their names and periods are in heteroflow_site.periodic_jobs: Celery beat runs them on their periods and
`manage.py run_loops --once` runs them in-process, for cron, operators and tests.
"""

from nodes.services import nodes_mark_silent_offline
from scheduling.cache.snapshot_builder import newest_tasks
from scheduling.cycle.run import run_cycle
from scheduling.groups.autoscale import autoscale_groups
from scheduling.groups.replicas import rebuild_inference_groups
from scheduling.groups.restart import reconcile_gangs
from scheduling.groups.rollout import drive_rollouts
from scheduling.groups.windows import apply_scheduling_windows
from scheduling.hardware.drain import drain_nodes
from scheduling.history.samples import cluster_sample_record
from scheduling.housekeeping.loops import enforce_task_timeouts, recover_backlog, wake_borrowed_training
from scheduling.housekeeping.node_lost import release_lost_nodes
from scheduling.housekeeping.retention import apply_retention
from scheduling.plugins import restore_lost_plugin_state
from scheduling.preemption.watchdog import preemption_watchdog
from scheduling.queue import immediate_queue
from scheduling.usage.records import record_day_turn


def _figures(result) -> str:
    return " ".join(f"{key}={value}" for key, value in result.as_dict().items())


def cycle() -> str:
    return _figures(run_cycle(instance="cycle", attempts_behind=True))


def immediate_cycle() -> str:
    """A cycle as soon as the immediate queue holds work or someone asked for one; nothing otherwise."""
    if not immediate_queue.work_waiting():
        return "nothing waiting: no cycle"
    return _figures(run_cycle(instance="immediate-cycle", attempts_behind=True))


def liveness() -> str:
    return f"{nodes_mark_silent_offline()} silent node(s) marked offline"


def node_lost() -> str:
    return release_lost_nodes().summary()


def watchdog() -> str:
    return f"{preemption_watchdog()} unconfirmed preemption(s) settled"


def backlog_recovery() -> str:
    """Scheduled tasks nobody will start go back to the queue, and gangs a crash left half-run are made whole."""
    recovered = recover_backlog()
    return f"{recovered} stuck scheduled task(s) back to pending, {reconcile_gangs()} gang(s) made whole"


def timeouts() -> str:
    return f"{enforce_task_timeouts()} overdue task(s) stopping"


def inference_rebuild() -> str:
    return f"{rebuild_inference_groups()} inference replica(s) created"


def training_wakeup() -> str:
    return f"{wake_borrowed_training()} waiting training task(s) re-queued"


def windows() -> str:
    run = apply_scheduling_windows()
    if not run.leader:
        return "another instance holds the windows lock: nothing done"
    return f"{len(run.changed_groups)} group(s) changed by their window"


def rollouts() -> str:
    run = drive_rollouts()
    if not run.leader:
        return "another instance holds the rollouts lock: nothing done"
    return f"{len(run.stepped)} rollout(s) driven"


def autoscale() -> str:
    """The autoscaler (design §17.2): every autoscaled inference group's replica count from its metric."""
    run = autoscale_groups()
    if not run.leader:
        return "another instance holds the autoscaler lock: nothing done"
    return f"{len(run.scaled)} group(s) rescaled"


def drains() -> str:
    """Draining nodes (design §17.3): their tasks stopped, the empty ones marked drained."""
    run = drain_nodes()
    if not run.leader:
        return "another instance holds the drain lock: nothing done"
    return f"{run.stopping} task(s) stopping for drains, {len(run.drained)} node(s) drained"


def plugin_state() -> str:
    """What plugins keep outside PostgreSQL (fgd's recent-task window in Redis) is rebuilt if it was lost."""
    return "; ".join(restore_lost_plugin_state(newest_tasks)) or "no plugin keeps state elsewhere"


def usage_day_turn() -> str:
    return f"{record_day_turn()} running placement(s) recorded up to the last midnight"


def retention() -> str:
    return apply_retention().summary()


def history() -> str:
    sample = cluster_sample_record()
    return f"history point: {sample.pending} pending, {sum(sample.gpu_used.values())} card(s) held"
