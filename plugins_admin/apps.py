from django.apps import AppConfig


class PluginsAdminConfig(AppConfig):
    name = "plugins_admin"
    verbose_name = "Plugins"

    def ready(self) -> None:
        # Connects the notification plugins to task transitions and registers their Celery task.
        from plugins_admin.notifications import delivery  # noqa: F401
