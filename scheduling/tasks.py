"""Celery entry points of the scheduling tickers. Each is a thin call into the module that owns the work."""

from celery import shared_task


@shared_task(name="scheduling.tasks.preemption_watchdog", ignore_result=True)
def preemption_watchdog() -> int:
    from scheduling.preemption.watchdog import preemption_watchdog as settle_overdue_preemptions

    return settle_overdue_preemptions()


@shared_task(name="scheduling.tasks.run_cycle", ignore_result=True)
def run_cycle() -> dict:
    from scheduling.cycle import run_cycle as run_scheduling_cycle

    return run_scheduling_cycle(instance="celery").as_dict()


@shared_task(name="scheduling.tasks.run_cycle_for_new_tasks", ignore_result=True)
def run_cycle_for_new_tasks() -> dict | None:
    """A submitted task should not wait for the 5 s tick: run a cycle as soon as the immediate queue holds work."""
    from scheduling import immediate_queue
    from scheduling.cycle import run_cycle as run_scheduling_cycle

    if immediate_queue.length() == 0:
        return None
    return run_scheduling_cycle(instance="celery-immediate").as_dict()


@shared_task(name="scheduling.tasks.recover_backlog", ignore_result=True)
def recover_backlog() -> str:
    from scheduling.tickers import backlog_recovery

    return backlog_recovery()


@shared_task(name="scheduling.tasks.release_lost_nodes", ignore_result=True)
def release_lost_nodes() -> str:
    from scheduling.tickers import node_lost

    return node_lost()


@shared_task(name="scheduling.tasks.enforce_task_timeouts", ignore_result=True)
def enforce_task_timeouts() -> int:
    from scheduling.loops import enforce_task_timeouts as stop_overdue_tasks

    return stop_overdue_tasks()


@shared_task(name="scheduling.tasks.wake_borrowed_training", ignore_result=True)
def wake_borrowed_training() -> int:
    from scheduling.loops import wake_borrowed_training as requeue_waiting_training

    return requeue_waiting_training()


@shared_task(name="scheduling.tasks.rebuild_inference_groups", ignore_result=True)
def rebuild_inference_groups() -> int:
    from scheduling.groups.replicas import rebuild_inference_groups as create_missing_replicas

    return create_missing_replicas()


@shared_task(name="scheduling.tasks.apply_scheduling_windows", ignore_result=True)
def apply_scheduling_windows() -> int:
    from scheduling.groups.windows import apply_scheduling_windows as run_windows

    return len(run_windows().changed_groups)
