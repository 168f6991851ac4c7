"""The functions of the periodic jobs of design §4, §11 and §15, each returning one line on what it did.

Their names and periods are in heteroflow_site.periodic_jobs: Celery beat runs them on their periods and
`manage.py run_loops --once` runs them in-process, for cron, operators and tests.
"""

from scheduling.queue import immediate_queue
from nodes.services import nodes_mark_silent_offline
from scheduling.cycle.run import run_cycle
from scheduling.groups.replicas import rebuild_inference_groups
from scheduling.groups.restart import reconcile_gangs
from scheduling.groups.windows import apply_scheduling_windows
from scheduling.history.samples import cluster_sample_record
from scheduling.housekeeping.loops import enforce_task_timeouts, recover_backlog, wake_borrowed_training
from scheduling.housekeeping.node_lost import release_lost_nodes
from scheduling.plugins import restore_lost_plugin_state
from scheduling.preemption.watchdog import preemption_watchdog


def _figures(result) -> str:
    return " ".join(f"{key}={value}" for key, value in result.as_dict().items())


def cycle() -> str:
    return _figures(run_cycle(instance="cycle"))


def immediate_cycle() -> str:
    """A cycle as soon as the immediate queue holds work or someone asked for one; nothing otherwise."""
    if not immediate_queue.work_waiting():
        return "nothing waiting: no cycle"
    return _figures(run_cycle(instance="immediate-cycle"))


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


def plugin_state() -> str:
    """What plugins keep outside PostgreSQL (fgd's recent-task window in Redis) is rebuilt if it was lost."""
    return "; ".join(restore_lost_plugin_state()) or "no plugin keeps state elsewhere"


def history() -> str:
    sample = cluster_sample_record()
    return f"history point: {sample.pending} pending, {sum(sample.gpu_used.values())} card(s) held"
