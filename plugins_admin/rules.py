"""The plugin rules (docs/scheduling.md) as pure functions: what switching or updating a plugin changes, or why it
is refused. The services apply them to locked rows; the what-if preview applies them to the settings in memory, so
a previewed change is allowed or refused exactly as saving it would be."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from heteroflow_site.errors import DomainError, NotAllowed, NotFoundReference
from scheduling.framework.registry import PluginSetting, PluginSpec, Registry, validate_extra
from scheduling.framework.settings_schema import SettingError

MIN_WEIGHT = 0
MAX_WEIGHT = 100

# Plugin name → {row field: new value}.
Changes = dict[str, dict[str, Any]]


class UnknownPlugin(LookupError):
    """No registered plugin or notification channel has this name (an API 404)."""


@dataclass(frozen=True)
class PluginChangeRequest:
    """One change as the plugin API takes it: a switch (`enabled`) and/or a new weight and/or new settings."""

    name: str
    enabled: bool | None = None
    weight: int | None = None
    extra: dict[str, Any] | None = None


def plugin_spec(specs: Registry, name: str) -> PluginSpec:
    try:
        return specs[name]
    except KeyError:
        raise UnknownPlugin(name) from None


def switched_off_by(spec: PluginSpec, *, enabled: bool) -> list[str]:
    """The plugins that switching `spec` on turns off (the layout scorers spread, binpack and fgd exclude each
    other)."""
    return list(spec.exclusive_with) if enabled else []


def switch_changes(spec: PluginSpec, *, enabled: bool, weight: int) -> Changes:
    """Switching `spec` (whose weight is now `weight`) on or off."""
    if not enabled and spec.always_on:
        raise NotAllowed(f"{spec.name} is always on and cannot be disabled", field="enabled")
    changes: Changes = {spec.name: {"enabled": enabled}}
    if enabled and spec.is_scorer and weight == 0:
        # An enabled scorer with weight 0 would be a switch that does nothing.
        changes[spec.name]["weight"] = 1
    for other in switched_off_by(spec, enabled=enabled):
        changes[other] = {"enabled": False}
    return changes


def check_update(specs: Registry, spec: PluginSpec, *, weight: Any = None, extra: Any = None) -> None:
    """The checks of an update that need no row: the weight's range and kind, the plugin's own settings check."""
    if weight is not None:
        if isinstance(weight, bool) or not isinstance(weight, int) or not MIN_WEIGHT <= weight <= MAX_WEIGHT:
            raise DomainError(f"weight must be a whole number from {MIN_WEIGHT} to {MAX_WEIGHT}", field="weight")
        if not spec.is_scorer:
            raise NotAllowed(f"{spec.name} does not score nodes, so it has no weight", field="weight")
    if extra is not None:
        try:
            validate_extra(spec.name, extra, specs)
        except SettingError as exc:
            # What the plugin's published schema refuses: a 400 naming the setting (design §17.1).
            raise DomainError(str(exc), field=f"extra.{exc.key}" if exc.key else "extra") from None
        except ValueError as exc:
            raise NotAllowed(str(exc), field="extra") from None


def update_changes(spec: PluginSpec, *, enabled: bool, weight: int | None = None,
                   extra: dict[str, Any] | None = None) -> Changes:
    """Setting the weight and/or settings of `spec` (checked by `check_update`), which is now `enabled` or not."""
    changes: dict[str, Any] = {}
    if weight is not None:
        if weight == 0 and enabled:
            raise NotAllowed(f"{spec.name} is enabled, so its weight must be at least 1; disable it instead",
                              field="weight")
        changes["weight"] = weight
    if extra is not None:
        changes["extra"] = dict(extra)
    return {spec.name: changes}


def settings_after(settings: Sequence[PluginSetting], requests: Sequence[PluginChangeRequest],
                   specs: Registry) -> list[PluginSetting]:
    """`settings` as they would be once each request was saved in turn (its switch, then its update), as the
    services would save them; refused with the services' DomainError, its `field` prefixed by the request's
    position (`[1].weight`, and `[1].name` for a plugin nobody registered)."""
    state = {setting.name: {"enabled": setting.enabled, "weight": setting.weight, "extra": dict(setting.extra)}
             for setting in settings}
    for position, request in enumerate(requests):
        if request.name not in specs:
            raise NotFoundReference(f"no plugin named {request.name!r}", field=f"[{position}].name")
        spec = specs[request.name]
        try:
            if request.enabled is not None:
                _merge(state, switch_changes(spec, enabled=request.enabled, weight=state[spec.name]["weight"]))
            if request.weight is not None or request.extra is not None:
                check_update(specs, spec, weight=request.weight, extra=request.extra)
                _merge(state, update_changes(spec, enabled=state[spec.name]["enabled"], weight=request.weight,
                                             extra=request.extra))
        except DomainError as exc:
            raise at_position(position, exc) from None
    return [PluginSetting(name=name, enabled=row["enabled"] or specs[name].always_on, weight=row["weight"],
                          extra=row["extra"]) for name, row in state.items()]


def at_position(position: int, refusal: DomainError) -> DomainError:
    """A refusal of the change at `position` in a list of changes (of the same kind), its field named as the API
    names it."""
    return type(refusal)(refusal.message,
                       field=f"[{position}].{refusal.field}" if refusal.field else f"[{position}]")


def _merge(state: dict[str, dict[str, Any]], changes: Changes) -> None:
    for name, fields in changes.items():
        state[name].update(fields)
