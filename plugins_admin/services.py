"""Writes to the plugin set.

Each service locks the rows it touches, applies the plugin rules (docs/scheduling.md) and writes one PluginChange per
changed row in the same transaction. Nothing caches the set: each scheduling cycle reads it afresh.
"""

from collections.abc import Sequence
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from heteroflow_site.errors import DomainError
from plugins_admin.models import PluginChange
from plugins_admin.rules import (
    MAX_WEIGHT,
    MIN_WEIGHT,
    PluginChangeRequest,
    UnknownPlugin,
    at_position,
    check_update,
    plugin_spec,
    switch_changes,
    switched_off_by,
    update_changes,
)
from scheduling.framework.registry import Registry
from scheduling.models import PluginConfig
from scheduling.queue.services import queue_activate
from scheduling.selectors import default_setting, plugin_specs

__all__ = ["MAX_WEIGHT", "MIN_WEIGHT", "UnknownPlugin", "plugin_changes_apply", "plugin_set_enabled", "plugin_update"]


def plugin_set_enabled(*, name: str, enabled: bool, actor: AbstractBaseUser | None) -> PluginConfig:
    """Switch a plugin on or off. Enabling one layout scorer (spread, binpack, fgd) disables the others, in the
    same transaction."""
    specs = plugin_specs()
    spec = plugin_spec(specs, name)
    with transaction.atomic():
        rows = _lock_rows([name, *switched_off_by(spec, enabled=enabled)], specs)
        _apply(rows, switch_changes(spec, enabled=enabled, weight=rows[name].weight), actor=actor)
    return rows[name]


def plugin_update(*, name: str, weight: int | None = None, extra: dict[str, Any] | None = None,
                  actor: AbstractBaseUser | None) -> PluginConfig:
    """Set a scorer's weight (0–100) and/or replace a plugin's settings (`extra`, checked by the plugin)."""
    specs = plugin_specs()
    spec = plugin_spec(specs, name)
    check_update(specs, spec, weight=weight, extra=extra)
    with transaction.atomic():
        rows = _lock_rows([name], specs)
        _apply(rows, update_changes(spec, enabled=rows[name].enabled, weight=weight, extra=extra), actor=actor)
    return rows[name]


def plugin_changes_apply(*, requests: Sequence[PluginChangeRequest], actor: AbstractBaseUser | None) -> None:
    """Save several changes (the what-if preview's list) in one transaction: all of them or, refused, none. A
    refusal names the change's position, as the preview's does (`[1].extra`)."""
    with transaction.atomic():
        for position, request in enumerate(requests):
            try:
                if request.enabled is not None:
                    plugin_set_enabled(name=request.name, enabled=request.enabled, actor=actor)
                if request.weight is not None or request.extra is not None:
                    plugin_update(name=request.name, weight=request.weight, extra=request.extra, actor=actor)
            except DomainError as exc:
                raise at_position(position, exc) from None


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
