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
    default: PluginSetting | None = None
    kinds: frozenset[str] = frozenset()
    # Raises ValueError for a bad `extra`; None accepts any JSON object.
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

    @classmethod
    def from_factory(cls, factory: Any) -> PluginSpec:
        """A spec from a factory object carrying the spec attributes (`name`, `kinds`, optional `always_on`,
        `exclusive_with`, `default`, `validate_extra`, `description`) and callable as `factory(setting) -> plugin`."""
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


def validate_extra(name: str, extra: Any, registry: Registry) -> None:
    """Raise ValueError with a message fit for a 400 when `extra` is not valid for plugin `name`."""
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
    # The queue order (the queue-sort plugin's setting, design §16.3): "priority" or "weighted".
    queue_order: str = "priority"
    # The names of the framework's chain (`Registry.chain`), which `describe` leaves out.
    chain: frozenset[str] = frozenset()

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
    plugin removed from settings leaves its row behind). If two mutually exclusive plugins are both enabled — the
    config service prevents it, this is a guard — the one registered first wins: spread is kept, binpack dropped.
    """
    given = {setting.name: setting for setting in settings}
    plugin_set = PluginSet(chain=frozenset(spec.name for spec in registry.chain))
    chosen: set[str] = set()
    for spec in (*registry.chain, *registry.values()):
        name = spec.name
        setting = spec.default if name in plugin_set.chain else given.get(name, spec.default)
        if spec.always_on:
            setting = PluginSetting(name, True, setting.weight, setting.extra)
        if not setting.enabled or any(other in chosen for other in spec.exclusive_with):
            continue
        chosen.add(name)
        plugin = spec.factory(setting)
        for kind, points in _POINTS:
            if kind in spec.kinds:
                getattr(plugin_set, points).append(plugin)
        if SCORE in spec.kinds:
            plugin_set.scorers.append((plugin, setting.weight if setting.weight > 0 else 1))
        if POST_FILTER in spec.kinds and getattr(plugin, "preempt_stage", None):
            plugin_set.preempt_stage = plugin.preempt_stage
        if QUEUE_SORT in spec.kinds:
            plugin_set.queue_order = plugin.order
    return plugin_set
