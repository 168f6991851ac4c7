from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"

    def ready(self) -> None:
        # Receivers must be wired in every process that changes nodes or tasks (web, Celery workers, scheduler
        # loops): the heartbeat's gpu_used recount, the queue's activations, the groups following their members
        # and the live pushes; a worker process's startup frozen for the cycles.
        import scheduling.cycle.collector  # noqa: F401
        import scheduling.groups.receivers  # noqa: F401
        import scheduling.queue.receivers  # noqa: F401
        import scheduling.hardware.quarantine  # noqa: F401
        import scheduling.housekeeping.node_ledger  # noqa: F401
        import scheduling.web.live  # noqa: F401
        import scheduling.web.log_views  # noqa: F401

        from heteroflow_site.health import readiness_check_register
        from scheduling.metrics import check_scheduler

        readiness_check_register("scheduler", check_scheduler)
