from django.apps import AppConfig


class SchedulingConfig(AppConfig):
    name = "scheduling"

    def ready(self) -> None:
        # Live pushes must be wired in every process that changes tasks (web, Celery workers, scheduler loops).
        import scheduling.web.live  # noqa: F401
