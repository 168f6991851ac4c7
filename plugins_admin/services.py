"""Writes to the plugin set.

Each service locks the rows it touches, applies the plugin rules (docs/scheduling.md) and writes one PluginChange per
changed row in the same transaction. Nothing caches the set: each scheduling cycle reads it afresh.
"""

from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from heteroflow_site.errors import DomainError
from plugins_admin.models import PluginChange
from scheduling.framework.registry import PluginSpec, Registry, validate_extra
from scheduling.models import PluginConfig
from scheduling.queue.services import queue_activate
from scheduling.selectors import default_setting, plugin_specs

MIN_WEIGHT = 0
MAX_WEIGHT = 100


class UnknownPlugin(LookupError):
    """No registered plugin or notification channel has this name (an API 404)."""


def plugin_set_enabled(*, name: str, enabled: bool, actor: AbstractBaseUser | None) -> PluginConfig:
    """Switch a plugin on or off. Enabling spread disables binpack and vice versa, in the same transaction."""
    specs = plugin_specs()
    spec = _spec(specs, name)
    if not enabled and spec.always_on:
        raise DomainError(f"{name} is always on and cannot be disabled", field="enabled")
    exclusive = [spec.exclusive_with] if enabled and spec.exclusive_with else []
    with transaction.atomic():
        rows = _lock_rows([name, *exclusive], specs)
        changes: dict[str, dict[str, Any]] = {name: {"enabled": enabled}}
        if enabled and spec.is_scorer and rows[name].weight == 0:
            # An enabled scorer with weight 0 would be a switch that does nothing.
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
        queue_activate(reason=f"plugin configuration of {name} changed")


def _plugin_state(row: PluginConfig) -> dict[str, Any]:
    return {"enabled": row.enabled, "weight": row.weight, "extra": dict(row.extra)}


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
