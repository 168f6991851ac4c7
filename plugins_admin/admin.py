"""The plugin tables in the Django admin, to read only: every change goes through the plugin services (design §17.1:
exclusivity, validation, history), which the plugin page and API call."""

from django.contrib import admin

from plugins_admin.models import NotificationChannel, PluginChange
from scheduling.models import PluginConfig


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(PluginConfig)
class PluginConfigAdmin(ReadOnlyAdmin):
    list_display = ["name", "enabled", "weight", "extra", "updated_at"]
    list_filter = ["enabled"]


@admin.register(PluginChange)
class PluginChangeAdmin(ReadOnlyAdmin):
    list_display = ["at", "plugin", "actor", "before", "after"]
    list_filter = ["plugin"]


@admin.register(NotificationChannel)
class NotificationChannelAdmin(ReadOnlyAdmin):
    list_display = ["kind", "enabled", "target", "updated_at"]
