from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"

    def ready(self) -> None:
        # Receivers must be wired in every process that changes nodes or tasks (web, Celery workers, scheduler
        # loops): the heartbeat's gpu_used recount and the live pushes.
        import scheduling.services.node_ledger  # noqa: F401
        import scheduling.web.live  # noqa: F401
        from nodes.selectors import card_holders_register
        from scheduling.selectors import node_card_holders

        card_holders_register(node_card_holders)
