"""Writes to the notification channels, audited in the plugin history like the plugin set."""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email
from django.db import transaction

from heteroflow_site.errors import Conflict, DomainError, NotAllowed
from plugins_admin.models import NotificationChannel, PluginChange
from plugins_admin.notifications.delivery import (
    CHANNEL_EVENTS,
    DeliveryResult,
    deliver,
    email_addresses,
    masked_url,
    sample_payload,
)
from plugins_admin.services import UnknownPlugin

NOTIFICATION_AUDIT_PREFIX = "notification:"


def notification_channel_update(*, kind: str, enabled: bool, target: str, events: list[str],
                                actor: AbstractBaseUser | None) -> NotificationChannel:
    if kind not in NotificationChannel.Kind.values:
        raise UnknownPlugin(kind)
    target = _checked_target(kind, target.strip(), enabled=enabled)
    unknown_events = sorted(set(events) - set(CHANNEL_EVENTS))
    if unknown_events:
        raise DomainError(f"unknown event {', '.join(unknown_events)}; choose from {', '.join(CHANNEL_EVENTS)}",
                          field="events")
    if enabled and not events:
        raise NotAllowed("choose at least one event to notify about", field="events")
    ordered_events = [event for event in CHANNEL_EVENTS if event in events]
    with transaction.atomic():
        NotificationChannel.objects.bulk_create(
            [NotificationChannel(kind=kind, events=list(CHANNEL_EVENTS))], ignore_conflicts=True)
        channel = NotificationChannel.objects.select_for_update().get(kind=kind)
        before = _channel_state(channel)
        channel.enabled, channel.target, channel.events = enabled, target, ordered_events
        after = _channel_state(channel)
        if after != before:
            channel.save(update_fields=["enabled", "target", "events", "updated_at"])
            PluginChange.objects.create(plugin=f"{NOTIFICATION_AUDIT_PREFIX}{kind}", actor=actor,
                                        before=_audited(kind, before), after=_audited(kind, after))
    return channel


def notification_channel_test(*, kind: str) -> DeliveryResult:
    """Send a test notification through the channel's saved target now and say how it went."""
    if kind not in NotificationChannel.Kind.values:
        raise UnknownPlugin(kind)
    channel = NotificationChannel.objects.filter(kind=kind).first()
    if channel is None or not channel.target:
        what = "a URL" if kind == NotificationChannel.Kind.WEBHOOK else "an address"
        raise Conflict(f"save {what} first", field="target")
    return deliver(channel, sample_payload())


def _audited(kind: str, state: dict[str, Any]) -> dict[str, Any]:
    """The plugin history never shows a webhook's secret part (design §16.5)."""
    if kind != NotificationChannel.Kind.WEBHOOK or not state["target"]:
        return state
    return {**state, "target": masked_url(state["target"])}


def _channel_state(channel: NotificationChannel) -> dict[str, Any]:
    return {"enabled": channel.enabled, "target": channel.target, "events": list(channel.events)}


def _checked_target(kind: str, target: str, *, enabled: bool) -> str:
    if not target:
        if enabled:
            what = "a URL" if kind == NotificationChannel.Kind.WEBHOOK else "at least one address"
            raise NotAllowed(f"enter {what} to enable this channel", field="target")
        return ""
    if kind == NotificationChannel.Kind.WEBHOOK:
        try:
            URLValidator(schemes=["http", "https"])(target)
        except ValidationError:
            raise NotAllowed("enter a valid http:// or https:// URL", field="target") from None
        return target
    addresses = email_addresses(target)
    invalid = []
    for address in addresses:
        try:
            validate_email(address)
        except ValidationError:
            invalid.append(address)
    if invalid:
        raise NotAllowed(f"not an e-mail address: {', '.join(invalid)}", field="target")
    return ", ".join(addresses)
