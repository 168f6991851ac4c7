from django.contrib import admin

from plugins_admin.models import NotificationChannel, PluginChange
from scheduling.models import PluginConfig


@admin.register(PluginConfig)
class PluginConfigAdmin(admin.ModelAdmin):
    list_display = ["name", "enabled", "weight", "extra", "updated_at"]
    list_filter = ["enabled"]


@admin.register(PluginChange)
class PluginChangeAdmin(admin.ModelAdmin):
    list_display = ["at", "plugin", "actor", "before", "after"]
    list_filter = ["plugin"]


@admin.register(NotificationChannel)
class NotificationChannelAdmin(admin.ModelAdmin):
    list_display = ["kind", "enabled", "target", "updated_at"]
