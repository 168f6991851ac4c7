from plugins_admin.models import NotificationChannel
from plugins_admin.notifications.delivery import CHANNEL_EVENTS


def notification_channels() -> list[NotificationChannel]:
    """The webhook and e-mail channels, always both, in that order (a missing row reads as disabled)."""
    rows = {channel.kind: channel for channel in NotificationChannel.objects.all()}
    return [rows.get(kind) or NotificationChannel(kind=kind, events=list(CHANNEL_EVENTS))
            for kind in NotificationChannel.Kind.values]
