"""The periodic jobs of design §4, §11 and §15: one table, one name per job.

Celery beat's schedule (settings.CELERY_BEAT_SCHEDULE), the Celery task that runs a job (heteroflow_site.celery)
and `manage.py run_loops --once` all come from PERIODIC_JOBS, so a job is added, renamed or re-timed here only.
Functions are named by dotted path: settings import this module before any app is loaded.
"""

from dataclasses import dataclass

RUN_JOB_TASK = "heteroflow.periodic_job"


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    period: float
    """Seconds between two runs under Celery beat; a run still queued when the next is due is dropped."""
    function: str
    """Dotted path of a callable without arguments that returns one line on what it did."""
    in_run_loops: bool = True
    """False for a beat-only job that `run_loops --once` has no use for (it runs the full cycle anyway)."""


# run_loops' order: housekeeping first, the cycle last, so that one pass places what the others freed.
PERIODIC_JOBS: tuple[PeriodicJob, ...] = (
    PeriodicJob("liveness", 10.0, "scheduling.housekeeping.tickers.liveness"),
    PeriodicJob("node-lost", 30.0, "scheduling.housekeeping.tickers.node_lost"),
    PeriodicJob("watchdog", 30.0, "scheduling.housekeeping.tickers.watchdog"),
    PeriodicJob("drains", 10.0, "scheduling.housekeeping.tickers.drains"),
    PeriodicJob("timeouts", 30.0, "scheduling.housekeeping.tickers.timeouts"),
    PeriodicJob("backlog", 60.0, "scheduling.housekeeping.tickers.backlog_recovery"),
    PeriodicJob("windows", 60.0, "scheduling.housekeeping.tickers.windows"),
    PeriodicJob("inference-rebuild", 10.0, "scheduling.housekeeping.tickers.inference_rebuild"),
    # Rolling updates (design §17.2): each tick moves every rollout in progress one step.
    PeriodicJob("rollouts", 5.0, "scheduling.housekeeping.tickers.rollouts"),
    # The autoscaler (design §17.2): HPA's period.
    PeriodicJob("autoscale", 15.0, "scheduling.housekeeping.tickers.autoscale"),
    PeriodicJob("training-wakeup", 15.0, "scheduling.housekeeping.tickers.training_wakeup"),
    PeriodicJob("plugin-state", 60.0, "scheduling.housekeeping.tickers.plugin_state"),
    # Each run records running placements up to the last midnight; the runs after it in one day find nothing.
    PeriodicJob("usage", 300.0, "scheduling.housekeeping.tickers.usage_day_turn"),
    # Finished tasks past retention, and each tenant's log budget (design §17.4).
    PeriodicJob("retention", 60.0, "scheduling.housekeeping.tickers.retention"),
    PeriodicJob("history", 60.0, "scheduling.housekeeping.tickers.history"),
    PeriodicJob("cycle", 5.0, "scheduling.housekeeping.tickers.cycle"),
    # A submitted task (or a requested cycle) should not wait for the 5 s tick.
    PeriodicJob("immediate-cycle", 1.0, "scheduling.housekeeping.tickers.immediate_cycle", in_run_loops=False),
)


def beat_schedule(jobs: tuple[PeriodicJob, ...] = PERIODIC_JOBS) -> dict[str, dict]:
    """Celery beat's entries, one per job under the job's name."""
    return {job.name: {"task": RUN_JOB_TASK, "schedule": job.period, "args": (job.name,),
                       "options": {"expires": job.period}}
            for job in jobs}
