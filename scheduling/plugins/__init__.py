"""The built-in scheduling plugins (design §6's eight, §15.9's fgd, §16.3's node-pools, defrag and queue-sort, and
the framework's chain of rules every task meets), one package each, kube-scheduler style: each exports its `NAME`,
its reasons and its `SPEC` (the `PluginSpec` the registry holds, description included)."""

import logging
from collections.abc import Callable, Iterable
from typing import Any

from scheduling.framework.registry import PluginSet, PluginSetting, PluginSpec, Registry, import_dotted
from scheduling.framework.registry import build_plugin_set as _build_plugin_set
from scheduling.plugins import (
    affinity,
    availability,
    binpack,
    card_health,
    defrag,
    fgd,
    gang,
    gpu_filter,
    model_locality,
    node_pools,
    nvlink,
    preempt,
    queue_sort,
    quota,
    rdma,
    replica_spread,
    reservation,
    resource_filter,
    resource_prefilter,
    single_tenant_runtime,
    spread,
    tenant,
    tenant_active,
    topology,
)

logger = logging.getLogger(__name__)

# The framework's chain (design §4 step 1): the rules every task meets, always on, with nothing to configure; each
# extension point runs these first, in this order. A new such rule is a package here and one entry in this tuple.
FRAMEWORK_CHAIN: tuple[PluginSpec, ...] = (
    tenant_active.SPEC, quota.SPEC,
    availability.SPEC, tenant.SPEC, reservation.SPEC, resource_prefilter.SPEC, single_tenant_runtime.SPEC,
    affinity.SPEC,
    gang.SPEC,
)
# The configurable plugins; registration order is the order each extension point runs them in, after the chain.
BUILTIN_SPECS: tuple[PluginSpec, ...] = (
    gpu_filter.SPEC, card_health.SPEC, resource_filter.SPEC, node_pools.SPEC, spread.SPEC, binpack.SPEC, fgd.SPEC,
    nvlink.SPEC, topology.SPEC, rdma.SPEC, model_locality.SPEC, preempt.SPEC, defrag.SPEC, queue_sort.SPEC,
    # Always on, but after the configurable filters: it compares only the domains that could take the replica.
    replica_spread.SPEC,
)


def default_registry(extra_plugins: Iterable[str] | None = None) -> Registry:
    """The built-ins with their design §6 / §15.9 defaults, then the custom plugins named by dotted path
    (`settings.HETEROFLOW_EXTRA_PLUGINS` when `extra_plugins` is None)."""
    registry = Registry(chain=FRAMEWORK_CHAIN)
    for spec in BUILTIN_SPECS:
        registry.register(spec)
    if extra_plugins is None:
        from django.conf import settings

        extra_plugins = getattr(settings, "HETEROFLOW_EXTRA_PLUGINS", [])
    for path in extra_plugins:
        registry.register(PluginSpec.from_factory(import_dotted(path)))
    return registry


def build_plugin_set(settings: Iterable[PluginSetting], registry: Registry | None = None) -> PluginSet:
    """`framework.registry.build_plugin_set` over the default registry unless one is given."""
    return _build_plugin_set(settings, registry if registry is not None else default_registry())


def tell_tasks_created(tasks: Iterable[Any]) -> None:
    """Give the tasks whose creation committed to every plugin that keeps track of them (`on_tasks_created`). A
    plugin's bookkeeping only drifts a little without them: its failure is logged, never the creation's."""
    tasks = list(tasks)
    for spec in default_registry().values():
        if spec.on_tasks_created is None:
            continue
        try:
            spec.on_tasks_created(tasks)
        except Exception:
            logger.warning("plugin %s could not take note of task(s) %s", spec.name,
                           ", ".join(str(task.id) for task in tasks), exc_info=True)


def restore_lost_plugin_state(newest_tasks: Callable[[int], list[Any]]) -> list[str]:
    """Every plugin that keeps state outside PostgreSQL rebuilds it if it was lost (`restore_state`, handed
    `newest_tasks`): what each did, by name."""
    return [f"{spec.name}: {spec.restore_state(newest_tasks)}" for spec in default_registry().values()
            if spec.restore_state is not None]
