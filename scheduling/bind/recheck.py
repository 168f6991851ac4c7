"""The re-checks of bind (design §5.2): a placement the framework chose over the snapshot, judged again against the
rows just locked — the framework's chain on the live node, bind's load thresholds, the cards, port and shard. Each
check raises `BindRefused` with the attempt code; the first that fails decides."""

from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import Any

from scheduling.bind.live import LiveNode
from scheduling.bind.shards import ShardAllocationError, occupancy_of, shard_on_card
from scheduling.framework import reasons
from scheduling.framework.cards import ChosenCards, card_groups
from scheduling.framework.framework import Framework
from scheduling.framework.registry import Registry, build_plugin_set
from scheduling.framework.result import Rejection
from scheduling.framework.snapshot import CardInfo, NodeInfo, SchedulerConfig, TaskInfo, TenancyView
from scheduling.framework.table import NodeTable
from scheduling.models import TaskType
from scheduling.plugins import FRAMEWORK_CHAIN, availability, resource_prefilter, single_tenant_runtime, tenant


# The framework's card choice (its Reserve extension point): (task, node, tenancy) -> card indexes.
Reserve = Callable[[TaskInfo, NodeInfo, TenancyView | None], list[int]]


class BindRefused(Exception):
    def __init__(self, code: str, message: str, *, node_overloaded: bool = False):
        super().__init__(message)
        self.code = code
        self.message = message
        self.node_overloaded = node_overloaded


def check_node(task: TaskInfo, live: LiveNode, config: SchedulerConfig, table: NodeTable) -> None:
    """The framework's chain (`scheduling.plugins.FRAMEWORK_CHAIN`: available and not cordoned, not dedicated to
    another tenant, room in the `gpu_used` ledger, the inference limit, the host CPU and memory the node's active
    tasks book, one tenant's cards on a node whose containers see every card) run on the live node (its row of
    `table`, the batch's live nodes), then bind's own CPU and memory load thresholds. The plugin filters are the
    snapshot's: the live read carries no taints or topology."""
    rejection = _chain(config).node_rejection(task, table, table.row_of[live.id])
    if rejection is not None:
        raise _refusal(task, live, config, rejection)
    name = live.name
    if live.cpu_percent >= config.cpu_percent:
        raise BindRefused(reasons.LOAD_THRESHOLD_EXCEEDED,
                          f"node {name} CPU at {live.cpu_percent:g} % (threshold {config.cpu_percent:g} %)",
                          node_overloaded=True)
    if live.memory_gb:
        memory_percent = 100.0 * live.memory_used_mb / (live.memory_gb * 1024)
        if memory_percent >= config.memory_percent:
            raise BindRefused(reasons.LOAD_THRESHOLD_EXCEEDED,
                              f"node {name} memory at {memory_percent:.1f} % "
                              f"(threshold {config.memory_percent:g} %)", node_overloaded=True)


@lru_cache(maxsize=8)
def _chain(config: SchedulerConfig) -> Framework:
    return Framework(build_plugin_set([], Registry(chain=FRAMEWORK_CHAIN)), config)


def _refusal(task: TaskInfo, live: LiveNode, config: SchedulerConfig, rejection: Rejection) -> BindRefused:
    """The chain's rejection as bind reports it: the attempt code, and a message that names no other tenant's node
    or tasks (it reaches the tenant)."""
    name, node = live.name, live.node_info()
    if rejection.plugin == availability.NAME:
        return BindRefused(reasons.NO_SCHEDULABLE_NODES, f"node {name} is {live.status}"
                           + ("" if live.schedulable else " and cordoned"))
    if rejection.plugin == tenant.NAME:
        return BindRefused(reasons.NO_SCHEDULABLE_NODES, f"the chosen node is {tenant.DEDICATED_OTHER_TENANT}")
    if rejection.plugin == single_tenant_runtime.NAME:
        return BindRefused(reasons.NO_SCHEDULABLE_NODES,
                           f"the chosen node's containers see every card and another tenant's tasks hold them "
                           f"({single_tenant_runtime.SINGLE_TENANT_RUNTIME})")
    if rejection.reason == resource_prefilter.INSUFFICIENT_GPU:
        return BindRefused(reasons.INSUFFICIENT_RESOURCES,
                           f"node {name} has {max(live.gpu_total - live.gpu_used, 0)} free cards, the task needs "
                           f"{task.gpu_required}")
    if rejection.reason == resource_prefilter.INFERENCE_LIMIT:
        return BindRefused(reasons.INSUFFICIENT_RESOURCES,
                           f"node {name} already runs {node.inference_tasks} inference containers")
    if rejection.reason == resource_prefilter.INSUFFICIENT_HOST:
        return BindRefused(
            reasons.INSUFFICIENT_HOST_RESOURCES,
            f"node {name} has {max(node.host_cpu_free, 0):g} CPU cores and "
            f"{max(node.host_memory_free_mb, 0)} MB of memory unbooked, the task asks {task.cpu_cores:g} and "
            f"{task.memory_mb} MB")
    return BindRefused(rejection.attempt_code or (reasons.INSUFFICIENT_RESOURCES if rejection.resolvable
                                                  else reasons.NO_SCHEDULABLE_NODES),
                       f"node {name}: {rejection.reason}")


def choose_cards(task: TaskInfo, live_node: NodeInfo, preferred: list[int], config: SchedulerConfig,
                 tenancy: TenancyView | None, reserve: Reserve) -> ChosenCards:
    """The preferred cards if they all still qualify on live data, else the framework's choice over the live
    cards that qualify: a slightly stale snapshot costs nothing as long as the node still has room. Only cards of
    the task's card groups qualify (its type and gpu-model, one type only: design §15.2–§15.3)."""
    wanted = task.gpu_required or (1 if task.is_fractional else 0)
    if not wanted:
        return ChosenCards()
    preferred_type = getattr(preferred, "card_type", "")
    groups = [(card_type, cards, [card for card in cards if card_under_thresholds(card, config)])
              for card_type, cards in card_groups(task, live_node)]
    for card_type, _cards, cool in groups:
        by_index = {card.index: card for card in cool}
        if (not preferred_type or card_type == preferred_type) and len(set(preferred)) == wanted and all(
            index in by_index and _card_takes(task, by_index[index], config) for index in preferred
        ):
            return ChosenCards(sorted(set(preferred)), card_type)
    cool_cards = [card for _type, _cards, cool in groups for card in cool]
    chosen = reserve(task, replace(live_node, cards=cool_cards, cache={}), tenancy)
    if len(chosen) == wanted:
        return chosen
    eligible = [card for _type, cards, _cool in groups for card in cards]
    if sum(1 for card in eligible if _card_takes(task, card, config)) >= wanted:
        cool_ids = {id(card) for card in cool_cards}
        hot = "; ".join(_card_load(card, config) for card in eligible if id(card) not in cool_ids)
        raise BindRefused(reasons.LOAD_THRESHOLD_EXCEEDED, f"node {live_node.name}: {hot}")
    raise BindRefused(reasons.INSUFFICIENT_RESOURCES,
                      f"node {live_node.name} no longer has {wanted} card{'s' if wanted > 1 else ''} for the task")


def _card_takes(task: TaskInfo, card: CardInfo, config: SchedulerConfig) -> bool:
    """Whether the card can still take the task (a shard's memory, compute and tenants are `make_shard`'s)."""
    if task.is_fractional:
        return card.whole_card_tasks == 0
    return card.is_free and (not task.gpu_memory_mb or config.card_free_mb(card) >= task.gpu_memory_mb)


def card_under_thresholds(card: CardInfo, config: SchedulerConfig) -> bool:
    """The card-level load re-check (memory utilisation, utilisation, temperature)."""
    return (not config.card_overloaded(card) and card.utilization < config.gpu_utilization_percent
            and card.temperature < config.gpu_temperature_threshold)


def _card_load(card: CardInfo, config: SchedulerConfig) -> str:
    return (f"card {card.index} at {card.memory_utilization_percent:.1f} % memory "
            f"(threshold {config.gpu_memory_percent:g} %), {card.utilization:g} % utilisation "
            f"(threshold {config.gpu_utilization_percent:g} %), {card.temperature:g} °C "
            f"(threshold {config.gpu_temperature_threshold:g} °C)")


def choose_port(task: TaskInfo, live: LiveNode, config: SchedulerConfig) -> int | None:
    """The lowest host port of the range that no active task on the node holds (inference only)."""
    if task.type != TaskType.INFERENCE:
        return None
    taken = {placement.port for placement in live.placements if placement.port is not None}
    for port in range(config.port_range_start, config.port_range_end + 1):
        if port not in taken:
            return port
    raise BindRefused(reasons.PORTS_EXHAUSTED,
                      f"node {live.name} has no free port in {config.port_range_start}–{config.port_range_end}")


def make_shard(task: TaskInfo, live: LiveNode, cards: list[int], config: SchedulerConfig,
               tenancy: TenancyView | None) -> dict[str, Any] | None:
    """A fractional task's shard, over the card and placements read under the node lock."""
    if not task.is_fractional:
        return None
    card_type = getattr(cards, "card_type", "")
    card = live.card_row(cards[0], card_type)
    if card is None:
        raise BindRefused(reasons.SHARD_ALLOCATION_FAILED, f"card {cards[0]} is not on node {live.name}")
    index, memory_total_mb, memory_used_mb, _utilization, _temperature, vendor, model, quarantined = card
    if quarantined:
        raise BindRefused(reasons.SHARD_ALLOCATION_FAILED, f"card {index} of node {live.name} is quarantined")
    same_type = vendor or live.gpu_type
    held = occupancy_of((p.tenant_id, p.gpus, p.shard) for p in live.placements
                        if (p.card_type or live.gpu_type) == same_type).get(index)
    try:
        return shard_on_card(task=task, card_index=index, vendor=vendor or live.gpu_type, model=model,
                             memory_total_mb=memory_total_mb, memory_used_mb=memory_used_mb, held=held,
                             tenancy=tenancy, config=config)
    except ShardAllocationError as error:
        raise BindRefused(reasons.SHARD_ALLOCATION_FAILED, str(error)) from error
