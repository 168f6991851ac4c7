from django.conf import settings
from django.db import models


class PluginChange(models.Model):
    plugin = models.CharField(max_length=64, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    before = models.JSONField(default=dict)
    after = models.JSONField(default=dict)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]


class NotificationChannel(models.Model):
    """A notification plugin (webhook or e-mail) told about task failed / preempted / succeeded."""

    class Kind(models.TextChoices):
        WEBHOOK = "webhook"
        EMAIL = "email"

    kind = models.CharField(max_length=16, choices=Kind.choices, unique=True)
    enabled = models.BooleanField(default=False)
    target = models.CharField(max_length=500, blank=True, default="", help_text="URL or comma-separated addresses")
    events = models.JSONField(default=list, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
