"""Celery entry points of the scheduling tickers (SPEC §4). Each is a thin call into the module that owns the work."""

from celery import shared_task


@shared_task(name="scheduling.tasks.preemption_watchdog", ignore_result=True)
def preemption_watchdog() -> int:
    from scheduling.preemption.watchdog import preemption_watchdog as settle_overdue_preemptions

    return settle_overdue_preemptions()
