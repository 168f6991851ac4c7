from django.apps import AppConfig


class PluginsAdminConfig(AppConfig):
    name = "plugins_admin"
    verbose_name = "Plugins"
