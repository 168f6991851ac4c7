"""Writes to the plugin set and the notification channels (SPEC §6).

Each service locks the rows it touches, applies SPEC §6's rules, writes one PluginChange per changed row and,
after commit, sends `plugin_set_changed`: one function does the write, the audit and the notification.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator, validate_email
from django.db import transaction

from heteroflow_site.errors import DomainError
from plugins_admin.models import NotificationChannel, PluginChange, PluginConfig
from plugins_admin.notifications import TASK_EVENTS, DeliveryResult, deliver, email_addresses, sample_payload
from plugins_admin.selectors import default_setting, plugin_specs
from plugins_admin.signals import plugin_set_changed
from scheduling.framework.registry import PluginSpec, Registry, validate_extra

MIN_WEIGHT = 0
MAX_WEIGHT = 100
NOTIFICATION_AUDIT_PREFIX = "notification:"


class UnknownPlugin(LookupError):
    """No registered plugin or notification channel has this name (an API 404)."""


def plugin_set_enabled(*, name: str, enabled: bool, actor: AbstractBaseUser | None) -> PluginConfig:
    """Switch a plugin on or off. Enabling one layout scorer (spread, binpack, fgd) disables the others, in the
    same transaction."""
    specs = plugin_specs()
    spec = _spec(specs, name)
    if not enabled and spec.always_on:
        raise DomainError(f"{name} is always on and cannot be disabled", field="enabled")
    exclusive = list(spec.exclusive_with) if enabled else []
    with transaction.atomic():
        rows = _lock_rows([name, *exclusive], specs)
        changes: dict[str, dict[str, Any]] = {name: {"enabled": enabled}}
        if enabled and spec.is_scorer and rows[name].weight == 0:
            # An enabled scorer with weight 0 would be a switch that does nothing (SPEC §6).
            changes[name]["weight"] = 1
        for other in exclusive:
            changes[other] = {"enabled": False}
        _apply(rows, changes, actor=actor)
    return rows[name]


def plugin_update(*, name: str, weight: int | None = None, extra: dict[str, Any] | None = None,
                  actor: AbstractBaseUser | None) -> PluginConfig:
    """Set a scorer's weight (0–100) and/or replace a plugin's settings (`extra`, checked by the plugin)."""
    specs = plugin_specs()
    spec = _spec(specs, name)
    if weight is not None:
        _check_weight(spec, weight)
    if extra is not None:
        _check_extra(specs, name, extra)
    with transaction.atomic():
        rows = _lock_rows([name], specs)
        changes: dict[str, Any] = {}
        if weight is not None:
            if weight == 0 and rows[name].enabled:
                raise DomainError(f"{name} is enabled, so its weight must be at least 1; disable it instead",
                                  field="weight")
            changes["weight"] = weight
        if extra is not None:
            changes["extra"] = dict(extra)
        _apply(rows, {name: changes}, actor=actor)
    return rows[name]


def notification_channel_update(*, kind: str, enabled: bool, target: str, events: list[str],
                                actor: AbstractBaseUser | None) -> NotificationChannel:
    if kind not in NotificationChannel.Kind.values:
        raise UnknownPlugin(kind)
    target = _checked_target(kind, target.strip(), enabled=enabled)
    unknown_events = sorted(set(events) - set(TASK_EVENTS))
    if unknown_events:
        raise DomainError(f"unknown event {', '.join(unknown_events)}; choose from {', '.join(TASK_EVENTS)}",
                          field="events")
    if enabled and not events:
        raise DomainError("choose at least one event to notify about", field="events")
    ordered_events = [event for event in TASK_EVENTS if event in events]
    with transaction.atomic():
        NotificationChannel.objects.bulk_create(
            [NotificationChannel(kind=kind, events=list(TASK_EVENTS))], ignore_conflicts=True)
        channel = NotificationChannel.objects.select_for_update().get(kind=kind)
        before = _channel_state(channel)
        channel.enabled, channel.target, channel.events = enabled, target, ordered_events
        after = _channel_state(channel)
        if after != before:
            channel.save(update_fields=["enabled", "target", "events", "updated_at"])
            PluginChange.objects.create(plugin=f"{NOTIFICATION_AUDIT_PREFIX}{kind}", actor=actor,
                                        before=before, after=after)
    return channel


def notification_channel_test(*, kind: str) -> DeliveryResult:
    """Send a test notification through the channel's saved target now and say how it went."""
    if kind not in NotificationChannel.Kind.values:
        raise UnknownPlugin(kind)
    channel = NotificationChannel.objects.filter(kind=kind).first()
    if channel is None or not channel.target:
        what = "a URL" if kind == NotificationChannel.Kind.WEBHOOK else "an address"
        raise DomainError(f"save {what} first", field="target")
    return deliver(channel, sample_payload())


def _spec(specs: Registry, name: str) -> PluginSpec:
    try:
        return specs[name]
    except KeyError:
        raise UnknownPlugin(name) from None


def _lock_rows(names: list[str], specs: Registry) -> dict[str, PluginConfig]:
    """Row-lock the named plugins (creating a missing row from its defaults first), in name order."""
    PluginConfig.objects.bulk_create(
        [PluginConfig(name=name, enabled=setting.enabled, weight=setting.weight, extra=setting.extra)
         for name in names for setting in [default_setting(specs[name])]],
        ignore_conflicts=True,
    )
    return {row.name: row for row in PluginConfig.objects.select_for_update().filter(name__in=names).order_by("name")}


def _apply(rows: dict[str, PluginConfig], changes: dict[str, dict[str, Any]], *,
           actor: AbstractBaseUser | None) -> None:
    changed = []
    for name in sorted(changes):
        row = rows[name]
        before = _plugin_state(row)
        for field, value in changes[name].items():
            setattr(row, field, value)
        after = _plugin_state(row)
        if after == before:
            continue
        row.save(update_fields=["enabled", "weight", "extra", "updated_at"])
        PluginChange.objects.create(plugin=name, actor=actor, before=before, after=after)
        changed.append(name)
    if changed:
        transaction.on_commit(lambda: plugin_set_changed.send(sender=PluginConfig, names=changed, actor=actor))


def _plugin_state(row: PluginConfig) -> dict[str, Any]:
    return {"enabled": row.enabled, "weight": row.weight, "extra": dict(row.extra)}


def _channel_state(channel: NotificationChannel) -> dict[str, Any]:
    return {"enabled": channel.enabled, "target": channel.target, "events": list(channel.events)}


def _check_weight(spec: PluginSpec, weight: Any) -> None:
    if isinstance(weight, bool) or not isinstance(weight, int) or not MIN_WEIGHT <= weight <= MAX_WEIGHT:
        raise DomainError(f"weight must be a whole number from {MIN_WEIGHT} to {MAX_WEIGHT}", field="weight")
    if not spec.is_scorer:
        raise DomainError(f"{spec.name} does not score nodes, so it has no weight", field="weight")


def _check_extra(specs: Registry, name: str, extra: Any) -> None:
    try:
        validate_extra(name, extra, specs)
    except ValueError as exc:
        raise DomainError(str(exc), field="extra") from None


def _checked_target(kind: str, target: str, *, enabled: bool) -> str:
    if not target:
        if enabled:
            what = "a URL" if kind == NotificationChannel.Kind.WEBHOOK else "at least one address"
            raise DomainError(f"enter {what} to enable this channel", field="target")
        return ""
    if kind == NotificationChannel.Kind.WEBHOOK:
        try:
            URLValidator(schemes=["http", "https"])(target)
        except ValidationError:
            raise DomainError("enter a valid http:// or https:// URL", field="target") from None
        return target
    addresses = email_addresses(target)
    invalid = []
    for address in addresses:
        try:
            validate_email(address)
        except ValidationError:
            invalid.append(address)
    if invalid:
        raise DomainError(f"not an e-mail address: {', '.join(invalid)}", field="target")
    return ", ".join(addresses)
