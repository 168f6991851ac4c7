"""The plugin registry and the plugin set a scheduler holds (design §6).

A plugin is registered as a `PluginSpec`: its name, a factory `factory(setting) -> plugin`, the extension points
it implements (`kinds`), its default setting and the description the plugin page shows. Each plugin package
exports its own `SPEC`; `scheduling.plugins.default_registry` lists the built-ins and adds the custom plugins named
by dotted path in `settings.HETEROFLOW_EXTRA_PLUGINS` (docs/custom-plugins.md). `build_plugin_set` turns stored
settings (PluginConfig rows, converted to `PluginSetting`) into the `PluginSet` a `Framework` runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any

from scheduling.framework.settings_schema import SettingError, check_settings_schema, settings_problem

PRE_FILTER = "pre_filter"
FILTER = "filter"
POST_FILTER = "post_filter"
PRE_SCORE = "pre_score"
SCORE = "score"
POST_SCORE = "post_score"
RESERVE = "reserve"
PERMIT = "permit"
BIND = "bind"
# The order a cycle takes its pending work in (one plugin, queue-sort).
QUEUE_SORT = "queue_sort"
# A plugin that only carries settings other code reads; it joins no extension point.
CONFIG = "config"
KINDS = frozenset({PRE_FILTER, FILTER, POST_FILTER, PRE_SCORE, SCORE, POST_SCORE, RESERVE, PERMIT, BIND, CONFIG,
                   QUEUE_SORT})


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
    # Which of several such plugins found enabled together is kept: the highest, then the one registered first.
    precedence: int = 0
    default: PluginSetting | None = None
    kinds: frozenset[str] = frozenset()
    # The JSON Schema of `extra` (`scheduling.framework.settings_schema`): published in the API's schema and checked
    # on every write, a refusal naming the setting; None: any JSON object.
    settings_schema: Mapping[str, Any] | None = None
    # A rule across settings the schema cannot state: raises ValueError for an `extra` it refuses.
    validate_extra: Callable[[Mapping[str, Any]], None] | None = None
    # What the plugin does, in the words of the plugin page ("" falls back to the factory's docstring).
    description: str = ""
    # Told of the tasks whose creation committed (objects with TaskInfo's fields); fgd keeps their shapes.
    on_tasks_created: Callable[[Iterable[Any]], None] | None = None
    # Rebuilds, from PostgreSQL, what the plugin keeps elsewhere once that was lost (fgd: its recent-task window, kept
    # in Redis); returns a line on what it did. Run by the `plugin-state` periodic job, which hands it
    # `newest_tasks(count)`: the newest tasks as TaskInfo, oldest first (a plugin reads no ORM).
    restore_state: Callable[[Callable[[int], list[Any]]], str] | None = None

    def __post_init__(self) -> None:
        if not self.kinds or not set(self.kinds) <= KINDS:
            raise ValueError(f"plugin {self.name!r}: kinds must be a non-empty subset of {sorted(KINDS)}")
        if self.default is None:
            object.__setattr__(self, "default", PluginSetting(self.name))
        if isinstance(self.exclusive_with, str) or self.exclusive_with is None:
            object.__setattr__(self, "exclusive_with", (self.exclusive_with,) if self.exclusive_with else ())
        if self.settings_schema is not None:
            check_settings_schema(self.name, self.settings_schema)

    @classmethod
    def from_factory(cls, factory: Any) -> PluginSpec:
        """A spec from a factory object carrying the spec attributes (`name`, `kinds`, optional `always_on`,
        `exclusive_with`, `default`, `settings_schema`, `validate_extra`, `description`) and callable as
        `factory(setting) -> plugin`."""
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
            precedence=getattr(factory, "precedence", 0),
            default=getattr(factory, "default", None),
            settings_schema=getattr(factory, "settings_schema", None),
            validate_extra=getattr(factory, "validate_extra", None),
            description=getattr(factory, "description", ""),
            on_tasks_created=getattr(factory, "on_tasks_created", None),
            restore_state=getattr(factory, "restore_state", None),
        )

    @property
    def is_scorer(self) -> bool:
        return SCORE in self.kinds


class Registry(dict[str, PluginSpec]):
    """Plugin name → spec, in registration order (which is also the order filters and scorers run in), and the
    framework's chain (`chain`): the always-on plugins of the rules every task meets whatever the plugin set (design
    §4 step 1), which every plugin set runs first at their extension points. The chain has nothing to configure: it
    is neither among the registry's entries (the plugin page, the settings) nor in `PluginSet.describe`."""

    def __init__(self, chain: Iterable[PluginSpec] = ()) -> None:
        super().__init__()
        self.chain = tuple(chain)

    def register(self, spec: PluginSpec) -> PluginSpec:
        if spec.name in self or any(spec.name == chained.name for chained in self.chain):
            raise ValueError(f"plugin {spec.name!r} is registered twice")
        self[spec.name] = spec
        return spec


def import_dotted(path: str) -> Any:
    module_path, _, attribute = path.rpartition(".")
    if not module_path:
        raise ValueError(f"extra plugin {path!r} is not a dotted path")
    try:
        return getattr(import_module(module_path), attribute)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"extra plugin {path!r} cannot be imported: {exc}") from exc


def outranked(enabled: Iterable[str], registry: Registry) -> set[str]:
    """Of the `enabled` plugins, those that give way to an enabled plugin they exclude (higher `precedence`, or equal
    and registered earlier). The config service never stores two of them enabled; a stored row, the Django admin or
    a migration may, and then binpack wins (design §17.1, the seed's "启用时 binpack 优先")."""
    enabled = set(enabled)
    position = {name: index for index, name in enumerate(registry)}

    def rank(name: str) -> tuple[int, int]:
        return registry[name].precedence, -position[name]

    return {name for name in enabled if name in registry
            for other in registry[name].exclusive_with if other in enabled and other in registry
            and rank(other) > rank(name)}


def validate_extra(name: str, extra: Any, registry: Registry) -> None:
    """Raise SettingError when `extra` is not what plugin `name`'s settings schema allows (naming the setting), or
    ValueError when the plugin's own rule (`validate_extra`) refuses it."""
    spec = registry.get(name)
    if spec is None:
        raise ValueError(f"unknown plugin {name!r}")
    if not isinstance(extra, Mapping):
        raise SettingError("extra must be a JSON object")
    if spec.settings_schema is not None:
        problem = settings_problem(name, spec.settings_schema, extra)
        if problem is not None:
            raise problem
    if spec.validate_extra is not None:
        spec.validate_extra(extra)


@dataclass
class PluginSet:
    """The instantiated plugins a scheduler runs, by extension point, and the preemption stage."""

    pre_filters: list[Any] = field(default_factory=list)
    filters: list[Any] = field(default_factory=list)
    post_filters: list[Any] = field(default_factory=list)
    pre_scorers: list[Any] = field(default_factory=list)
    scorers: list[tuple[Any, int]] = field(default_factory=list)
    post_scorers: list[Any] = field(default_factory=list)
    reservers: list[Any] = field(default_factory=list)
    permits: list[Any] = field(default_factory=list)
    binders: list[Any] = field(default_factory=list)
    # Which victims' states a PostFilter may evict (the preempt plugin's setting; "disabled" without it).
    preempt_stage: str = "disabled"
    # The queue order (the queue-sort plugin's setting, design §16.3, §17.1): "priority", "fair-share" or "weighted".
    queue_order: str = "priority"
    # The names of the framework's chain (`Registry.chain`), which `describe` leaves out.
    chain: frozenset[str] = frozenset()
    # The settings its plugins were made from (`build_plugin_set`), in order; None for a set put together by hand.
    # Equal settings make plugins that decide alike, so later cycles share results with earlier ones
    # (`framework.equivalence`).
    settings: tuple[PluginSetting, ...] | None = None

    def describe(self) -> dict[str, Any]:
        """design §14 `GET /api/v1/scheduler/plugins` (the configurable plugins)."""
        return {
            "filters": [plugin.name for plugin in self.filters if plugin.name not in self.chain],
            "scorers": [{"name": plugin.name, "weight": weight} for plugin, weight in self.scorers],
            "preempt_stage": self.preempt_stage,
        }


_POINTS = ((PRE_FILTER, "pre_filters"), (FILTER, "filters"), (POST_FILTER, "post_filters"),
           (PRE_SCORE, "pre_scorers"), (POST_SCORE, "post_scorers"), (RESERVE, "reservers"), (PERMIT, "permits"),
           (BIND, "binders"))


def build_plugin_set(settings: Iterable[PluginSetting], registry: Registry) -> PluginSet:
    """Instantiate the framework's chain and the enabled plugins, each extension point's in that order.

    Always-on plugins are included whatever the settings say; a plugin without a setting uses its default; an
    enabled scorer with weight 0 gets weight 1 (design §6). Settings naming unknown plugins are ignored (a custom
    plugin removed from settings leaves its row behind). Of mutually exclusive plugins found enabled together, only
    the one `outranked` leaves runs.
    """
    given = {setting.name: setting for setting in settings}
    plugin_set = PluginSet(chain=frozenset(spec.name for spec in registry.chain))
    specs = (*registry.chain, *registry.values())
    resolved = {}
    for spec in specs:
        setting = spec.default if spec.name in plugin_set.chain else given.get(spec.name, spec.default)
        resolved[spec.name] = PluginSetting(spec.name, True, setting.weight, setting.extra) if spec.always_on \
            else setting
    losers = outranked([name for name, setting in resolved.items() if setting.enabled], registry)
    made = []
    for spec in specs:
        setting = resolved[spec.name]
        if not setting.enabled or spec.name in losers:
            continue
        plugin = spec.factory(setting)
        made.append(setting)
        for kind, points in _POINTS:
            if kind in spec.kinds:
                getattr(plugin_set, points).append(plugin)
        if SCORE in spec.kinds:
            plugin_set.scorers.append((plugin, setting.weight if setting.weight > 0 else 1))
        if POST_FILTER in spec.kinds and getattr(plugin, "preempt_stage", None):
            plugin_set.preempt_stage = plugin.preempt_stage
        if QUEUE_SORT in spec.kinds:
            plugin_set.queue_order = plugin.order
    plugin_set.settings = tuple(made)
    return plugin_set
