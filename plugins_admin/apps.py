from django.apps import AppConfig


class PluginsAdminConfig(AppConfig):
    name = "plugins_admin"
    verbose_name = "Plugins"

    def ready(self) -> None:
        # Connects the notification plugins to task transitions and registers their Celery task.
        from plugins_admin.notifications import delivery  # noqa: F401
        from plugins_admin.selectors import plugin_changes_since
        from scheduling.history.markers import MARKER_SOURCES

        # Plugin changes are markers on the dashboard's history (the dashboard may not import this app).
        if plugin_changes_since not in MARKER_SOURCES:
            MARKER_SOURCES.append(plugin_changes_since)
