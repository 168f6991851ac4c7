"""The plugin registry and the plugin set a scheduler holds (SPEC §6).

A plugin is registered as a `PluginSpec`: its name, a factory `factory(setting) -> plugin`, the extension points
it implements (`kinds`) and its default setting. `build_plugin_set` turns stored settings (PluginConfig rows,
converted to `PluginSetting`) into the `PluginSet` a `Framework` runs. Custom plugins are named by dotted path in
`settings.HETEROFLOW_EXTRA_PLUGINS` (docs/custom-plugins.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

PRE_SCORE = "pre_score"
FILTER = "filter"
SCORE = "score"
POST_SCORE = "post_score"
BIND = "bind"
# A plugin that only carries settings other code reads (preempt's preempt_stage); it joins no extension point.
CONFIG = "config"
KINDS = frozenset({PRE_SCORE, FILTER, SCORE, POST_SCORE, BIND, CONFIG})

PREEMPT_STAGES = ("disabled", "scheduled", "running")

# Filters that reject for reasons which no amount of freeing changes run first, so a node of the wrong type is
# reported as "GPU type mismatch" rather than as short of cards.
_FILTER_ORDER = ("gpu-filter", "resource-filter")


@dataclass(frozen=True)
class PluginSetting:
    """One plugin's stored configuration (a PluginConfig row)."""

    name: str
    enabled: bool = True
    weight: int = 1
    extra: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PluginSpec:
    name: str
    factory: Callable[[PluginSetting], Any]
    always_on: bool = False
    # Names of the plugins that may not be enabled together with this one (a single name is accepted too).
    exclusive_with: tuple[str, ...] = ()
    default: PluginSetting | None = None
    kinds: frozenset[str] = frozenset()
    # Raises ValueError for a bad `extra`; None accepts any JSON object.
    validate_extra: Callable[[Mapping[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        if not self.kinds or not set(self.kinds) <= KINDS:
            raise ValueError(f"plugin {self.name!r}: kinds must be a non-empty subset of {sorted(KINDS)}")
        if self.default is None:
            object.__setattr__(self, "default", PluginSetting(self.name))
        if isinstance(self.exclusive_with, str) or self.exclusive_with is None:
            object.__setattr__(self, "exclusive_with", (self.exclusive_with,) if self.exclusive_with else ())

    @classmethod
    def from_factory(cls, factory: Any) -> PluginSpec:
        """A spec from a factory object carrying the spec attributes (`name`, `kinds`, optional `always_on`,
        `exclusive_with`, `default`, `validate_extra`) and callable as `factory(setting) -> plugin`."""
        if isinstance(factory, PluginSpec):
            return factory
        try:
            name, kinds = factory.name, frozenset(factory.kinds)
        except AttributeError as exc:
            raise ValueError(f"plugin factory {factory!r} lacks the spec attribute {exc.name!r}") from exc
        if not callable(factory):
            raise ValueError(f"plugin factory {name!r} is not callable")  # noqa: TRY004 - one error type for config
        return cls(
            name=name, factory=factory, kinds=kinds,
            always_on=getattr(factory, "always_on", False),
            exclusive_with=getattr(factory, "exclusive_with", ()),
            default=getattr(factory, "default", None),
            validate_extra=getattr(factory, "validate_extra", None),
        )

    @property
    def is_scorer(self) -> bool:
        return SCORE in self.kinds


class Registry(dict[str, PluginSpec]):
    """Plugin name → spec, in registration order (which is also the order filters and scorers run in)."""

    def register(self, spec: PluginSpec) -> PluginSpec:
        if spec.name in self:
            raise ValueError(f"plugin {spec.name!r} is registered twice")
        self[spec.name] = spec
        return spec


def _validate_preempt_extra(extra: Mapping[str, Any]) -> None:
    unknown = set(extra) - {"preempt_stage"}
    if unknown:
        raise ValueError(f"unknown preempt setting(s): {', '.join(sorted(unknown))}")
    stage = extra.get("preempt_stage", "running")
    if stage not in PREEMPT_STAGES:
        raise ValueError(f"preempt_stage must be one of {'|'.join(PREEMPT_STAGES)}, not {stage!r}")


def default_registry(extra_plugins: Iterable[str] | None = None) -> Registry:
    """The built-ins (SPEC §6's eight and §15.9's fgd) with their defaults, then the custom plugins named by dotted path
    (`settings.HETEROFLOW_EXTRA_PLUGINS` when `extra_plugins` is None)."""
    from scheduling.plugins import binpack, fgd, gpu_filter, nvlink, preempt, rdma, resource_filter, spread, topology

    registry = Registry()
    registry.register(PluginSpec(gpu_filter.NAME, gpu_filter.factory, always_on=True, kinds=frozenset({FILTER})))
    registry.register(PluginSpec(resource_filter.NAME, resource_filter.factory, always_on=True,
                                 kinds=frozenset({FILTER})))
    # The layout scorers: at most one of spread, binpack and fgd is enabled.
    registry.register(PluginSpec(spread.NAME, spread.factory, exclusive_with=(binpack.NAME, fgd.NAME),
                                 default=PluginSetting(spread.NAME, True, 1), kinds=frozenset({SCORE})))
    registry.register(PluginSpec(binpack.NAME, binpack.factory, exclusive_with=(spread.NAME, fgd.NAME),
                                 default=PluginSetting(binpack.NAME, False, 0), kinds=frozenset({SCORE})))
    registry.register(PluginSpec(fgd.NAME, fgd.factory, exclusive_with=(spread.NAME, binpack.NAME),
                                 default=PluginSetting(fgd.NAME, False, 0), kinds=frozenset({SCORE}),
                                 validate_extra=fgd.validate_extra))
    registry.register(PluginSpec(nvlink.NAME, nvlink.factory, default=PluginSetting(nvlink.NAME, True, 1),
                                 kinds=frozenset({FILTER, SCORE})))
    # The `topology: required` hard constraint is the built-in affinity filter's, so it holds with topology off.
    registry.register(PluginSpec(topology.NAME, topology.factory, default=PluginSetting(topology.NAME, True, 1),
                                 kinds=frozenset({SCORE})))
    registry.register(PluginSpec(rdma.NAME, rdma.factory, default=PluginSetting(rdma.NAME, True, 1),
                                 kinds=frozenset({FILTER, SCORE})))
    registry.register(PluginSpec(preempt.NAME, preempt.factory,
                                 default=PluginSetting(preempt.NAME, True, 0, {"preempt_stage": "running"}),
                                 kinds=frozenset({CONFIG}), validate_extra=_validate_preempt_extra))
    if extra_plugins is None:
        from django.conf import settings

        extra_plugins = getattr(settings, "HETEROFLOW_EXTRA_PLUGINS", [])
    for path in extra_plugins:
        registry.register(PluginSpec.from_factory(_import_dotted(path)))
    return registry


def _import_dotted(path: str) -> Any:
    module_path, _, attribute = path.rpartition(".")
    if not module_path:
        raise ValueError(f"extra plugin {path!r} is not a dotted path")
    try:
        return getattr(import_module(module_path), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"extra plugin {path!r} cannot be imported: {exc}") from exc


def validate_extra(name: str, extra: Any, registry: Registry | None = None) -> None:
    """Raise ValueError with a message fit for a 400 when `extra` is not valid for plugin `name`."""
    registry = registry if registry is not None else default_registry()
    spec = registry.get(name)
    if spec is None:
        raise ValueError(f"unknown plugin {name!r}")
    if not isinstance(extra, Mapping):
        raise ValueError("extra must be a JSON object")  # noqa: TRY004 - callers turn ValueError into a 400
    if spec.validate_extra is not None:
        spec.validate_extra(extra)


@dataclass
class PluginSet:
    """The instantiated plugins a scheduler runs, by extension point, and the preemption stage."""

    pre_scorers: list[Any] = field(default_factory=list)
    filters: list[Any] = field(default_factory=list)
    scorers: list[tuple[Any, int]] = field(default_factory=list)
    post_scorers: list[Any] = field(default_factory=list)
    binders: list[Any] = field(default_factory=list)
    preempt_stage: str = "running"

    def describe(self) -> dict[str, Any]:
        """SPEC §14 `GET /api/v1/scheduler/plugins`."""
        return {
            "filters": [plugin.name for plugin in self.filters],
            "scorers": [{"name": plugin.name, "weight": weight} for plugin, weight in self.scorers],
            "preempt_stage": self.preempt_stage,
        }


def build_plugin_set(settings: Iterable[PluginSetting], registry: Registry | None = None) -> PluginSet:
    """Instantiate the enabled plugins.

    Always-on plugins are included whatever the settings say; a plugin without a setting uses its default; an
    enabled scorer with weight 0 gets weight 1 (SPEC §6). Settings naming unknown plugins are ignored (a custom
    plugin removed from settings leaves its row behind). If two mutually exclusive plugins are both enabled — the
    config service prevents it, this is a guard — the one registered first wins: spread is kept, binpack dropped.
    """
    registry = registry if registry is not None else default_registry()
    given = {setting.name: setting for setting in settings}
    chosen: dict[str, tuple[PluginSpec, PluginSetting]] = {}
    for name, spec in registry.items():
        setting = given.get(name, spec.default)
        if spec.always_on:
            setting = PluginSetting(name, True, setting.weight, setting.extra)
        if not setting.enabled:
            continue
        if any(other in chosen for other in spec.exclusive_with):
            continue
        chosen[name] = (spec, setting)

    plugin_set = PluginSet()
    order = {name: position for position, name in enumerate(_FILTER_ORDER)}
    for name, (spec, setting) in sorted(chosen.items(), key=lambda item: order.get(item[0], len(order))):
        plugin = spec.factory(setting)
        if PRE_SCORE in spec.kinds:
            plugin_set.pre_scorers.append(plugin)
        if FILTER in spec.kinds:
            plugin_set.filters.append(plugin)
        if SCORE in spec.kinds:
            plugin_set.scorers.append((plugin, setting.weight if setting.weight > 0 else 1))
        if POST_SCORE in spec.kinds:
            plugin_set.post_scorers.append(plugin)
        if BIND in spec.kinds:
            plugin_set.binders.append(plugin)
    preempt = chosen.get("preempt")
    plugin_set.preempt_stage = preempt[1].extra.get("preempt_stage", "running") if preempt else "disabled"
    return plugin_set
