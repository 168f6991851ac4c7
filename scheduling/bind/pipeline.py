"""Bind (design §5): turn the framework's placements into database state, against live data.

A placement batch is the only unit. A single bind is a batch of one; a gang is a batch bound all or nothing; the
cycle commits up to BIND_BATCH placements at once. Whatever the size, one transaction of three round trips:

1. `live.lock_and_read`, pipelined: BEGIN, lock the involved node rows (id order), then the cohorts of the involved
   tenants (id order), then those of the involved tenants the quota book limits (id order), then read the live
   cards, the active placements and the quota usage;
2. every placement is re-checked in order (`recheck`) against the live rows plus the placements of this batch
   accepted before it — the framework's chain on the live node (state, dedication, the ledger, the inference
   limit, the booked host, the single-tenant runtime), bind's load thresholds, cards (re-chosen by the
   framework's Reserve when the snapshot's choice went stale), the port, the shard, the tenant's quota — and the
   accepted ones are claimed by ONE statement (`claim`), `task_transitioned` following after commit;
3. COMMIT (asynchronous, see `live.lock_and_read`).

A refused placement leaves its task pending and holds nothing; in an all-or-nothing batch the first refusal or
lost compare-and-swap refuses every placement and the transaction rolls back. A task another scheduler instance
claimed first is a `BIND_CONFLICT`, which the cycle skips silently.
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from scheduling.bind.claim import Claim, claim
from scheduling.bind.live import LiveCluster, LiveNode, LivePlacement, lock_and_read
from scheduling.bind.recheck import (
    BindRefused,
    Reserve,
    check_node,
    choose_cards,
    choose_port,
    make_shard,
)
from scheduling.fair_share.book import card_share
from scheduling.framework import reasons
from scheduling.framework.framework import Framework
from scheduling.framework.registry import PluginSet
from scheduling.framework.snapshot import NodeInfo, SchedulerConfig, TaskInfo, TenancyView
from scheduling.framework.status import Code, Status

LOST_CLAIM = "another scheduler instance bound the task first"


@dataclass(frozen=True)
class Placement:
    """One decision of the framework: `task` on `node` (the snapshot's), on the framework's `cards` (Reserve's
    `ChosenCards`, which know their card type). A gang member carries its timeline `reason`, its `rank` and
    environment too."""

    task: TaskInfo
    node: NodeInfo
    cards: list[int]
    reason: str | None = None
    rank: int | None = None


@dataclass(frozen=True)
class BindOutcome:
    code: str
    message: str
    cards: tuple[int, ...] = ()
    port: int | None = None
    shard: dict[str, Any] | None = None
    card_type: str = ""
    # The node itself is over a load threshold: no task may bind there until its next heartbeat says otherwise.
    node_overloaded: bool = False
    # In a refused all-or-nothing batch: this placement is the one that failed (the others share its outcome).
    culprit: bool = False
    # The bind transaction that committed it (the node change log's id for it); None when not bound by the pipeline.
    transaction: int | None = None

    @property
    def bound(self) -> bool:
        return self.code == reasons.SCHEDULED

    @property
    def conflict(self) -> bool:
        return self.code == reasons.BIND_CONFLICT


@dataclass
class _Accepted:
    position: int
    claim: Claim
    live: LiveNode
    held: LivePlacement


@dataclass
class _Batch:
    placements: Sequence[Placement]
    config: SchedulerConfig
    tenancy: TenancyView | None
    reserve: Reserve
    all_or_nothing: bool
    accepted: list[_Accepted] = field(default_factory=list)


class _AllOrNothingRefused(Exception):
    def __init__(self, position: int, refused: BindRefused):
        super().__init__(refused.message)
        self.position = position
        self.refused = refused


# Runs inside the transaction of an all-or-nothing batch once every placement is accepted, before the claim: the
# per-placement environment (a gang's rank and communication plan), from the live node rows.
EnvFor = Callable[[Mapping[int, LiveNode]], Sequence[dict[str, str]]]
# Runs inside the transaction after an all-or-nothing batch's claim won every task (a gang's group row, attempts).
AfterClaim = Callable[[Mapping[int, LiveNode]], None]


def bind_batch(placements: Sequence[Placement], *, config: SchedulerConfig, tenancy: TenancyView | None = None,
               reserve: Reserve | None = None, all_or_nothing: bool = False, env_for: EnvFor | None = None,
               after_claim: AfterClaim | None = None) -> list[BindOutcome]:
    """Bind `placements` in one transaction (module docstring); one outcome per placement, in order.

    `tenancy` (the cycle's share groups) lets a fractional task join shared cards without reading them again;
    `reserve` is the framework's card choice (`Framework.reserve`; without it the built-in one), used when the
    snapshot's cards went stale.
    """
    if not placements:
        return []
    reserve = reserve if reserve is not None else Framework(PluginSet(), config).reserve
    batch = _Batch(placements, config, tenancy, reserve, all_or_nothing)
    # Inside a caller's transaction the bind's transaction id is the caller's too, and names the caller's other
    # changes in the node change log as well: only a bind that is a transaction of its own reports it.
    alone = not connection.in_atomic_block
    try:
        with transaction.atomic():
            live = lock_and_read(sorted({placement.node.id for placement in placements}),
                                 sorted({placement.task.tenant_id for placement in placements}))
            outcomes = _recheck_all(batch, live)
            if all_or_nothing and env_for is not None:
                for accepted, env in zip(batch.accepted, env_for(live.nodes)):
                    accepted.claim.env = env
            claimed = claim([accepted.claim for accepted in batch.accepted])
            for accepted in batch.accepted:
                if accepted.claim.task.id in claimed.task_ids:
                    outcomes[accepted.position] = _bound(accepted, claimed.transaction if alone else None)
                else:
                    outcomes[accepted.position] = BindOutcome(code=reasons.BIND_CONFLICT, message=LOST_CLAIM)
                    if all_or_nothing:
                        # Rolls back the members already claimed: nothing of the batch is held.
                        raise _AllOrNothingRefused(accepted.position, BindRefused(reasons.BIND_CONFLICT,
                                                                                  LOST_CLAIM))
            if all_or_nothing and after_claim is not None:
                after_claim(live.nodes)
    except _AllOrNothingRefused as refused:
        return [BindOutcome(code=refused.refused.code, message=refused.refused.message,
                            node_overloaded=refused.refused.node_overloaded, culprit=position == refused.position)
                for position in range(len(placements))]
    return outcomes


def bind_placements(framework: Framework, placements: Sequence[Placement], *, tenancy: TenancyView | None = None,
                    all_or_nothing: bool = False, env_for: EnvFor | None = None,
                    after_claim: AfterClaim | None = None) -> list[BindOutcome]:
    """THE door into bind for single tasks and gangs alike: the framework's Bind plugins first (`Framework.bind`),
    what they skip one batch of this pipeline (`bind_batch`, all or nothing for a gang), the framework's Reserve
    choosing cards again where the snapshot's went stale."""
    config = framework.config
    return framework.bind(
        placements, tenancy=tenancy, all_or_nothing=all_or_nothing, plugin_outcome=plugin_bind_outcome,
        default_binder=lambda batch: bind_batch(batch, config=config, tenancy=tenancy, reserve=framework.reserve,
                                                all_or_nothing=all_or_nothing, env_for=env_for,
                                                after_claim=after_claim))


def plugin_bind_outcome(placement: Placement, status: Status) -> BindOutcome:
    """What a Bind plugin's own answer means (`Framework.bind`): bound by the plugin, or refused with its
    reason."""
    if status.code == Code.SUCCESS:
        return BindOutcome(code=reasons.SCHEDULED, message=f"bound to {placement.node.name} by {status.plugin}",
                           cards=tuple(placement.cards))
    return BindOutcome(code=status.attempt_code or reasons.NO_SCHEDULABLE_NODES,
                       message=f"{status.plugin}: {status.reason}")


def _recheck_all(batch: _Batch, live: LiveCluster) -> list[BindOutcome | None]:
    outcomes: list[BindOutcome | None] = [None] * len(batch.placements)
    if batch.all_or_nothing:
        _check_batch_quota(batch, live)
    for position, placement in enumerate(batch.placements):
        try:
            batch.accepted.append(_recheck(batch, live, position, placement))
        except BindRefused as refused:
            if batch.all_or_nothing:
                raise _AllOrNothingRefused(position, refused) from refused
            outcomes[position] = BindOutcome(code=refused.code, message=refused.message,
                                             node_overloaded=refused.node_overloaded)
    return outcomes


def _recheck(batch: _Batch, live: LiveCluster, position: int, placement: Placement) -> _Accepted:
    task, config = placement.task, batch.config
    node = live.nodes.get(placement.node.id)
    if node is None:
        raise BindRefused(reasons.NO_SCHEDULABLE_NODES, f"node {placement.node.name} no longer exists")
    check_node(task, node, config, live.table(config, node.id))
    cards = choose_cards(task, node.node_info(), placement.cards, config, batch.tenancy, batch.reserve)
    port = choose_port(task, node, config)
    shard = make_shard(task, node, cards, config, batch.tenancy)
    card_type = getattr(cards, "card_type", "")
    borrowed = _admit(live, task, node, card_type, shard)
    # The later placements of the batch are checked against this one as if it had committed.
    held = LivePlacement(task.tenant_id, task.type, list(cards), shard, port, task.gpu_memory_mb, card_type,
                         task.cpu_cores, task.memory_mb)
    node.hold(held, task.gpu_required)
    live.held(node)
    reason = placement.reason or f"bound to {node.name}"
    return _Accepted(position, Claim(task, node.id, list(cards), port, shard, reason, rank=placement.rank,
                                     card_type=card_type, borrowed=borrowed), node, held)


def _admit(live: LiveCluster, task: TaskInfo, node: LiveNode, card_type: str, shard: dict | None) -> bool:
    """The quota rule of the snapshot's PreFilter (design §16.2) on the live usage, for the cards chosen: the
    tenants' and their cohorts' rows are locked, so the usage includes every bind committed before ours. Books
    the task's share; True when it is admitted by borrowing."""
    gpu_type = card_type or task.gpu_type or node.gpu_type
    card = node.card_row(int(shard["card"]), card_type) if shard else None
    share = card_share(task, card[1] if card else 0)
    admission = live.quotas.admit(task, gpu_type=gpu_type, share=share)
    if admission.refusal is not None:
        raise BindRefused(reasons.QUOTA_EXCEEDED, admission.refusal)
    live.quotas.record_bind(task, gpu_type=gpu_type, share=share, borrowed=admission.borrowed)
    return admission.borrowed


def _check_batch_quota(batch: _Batch, live: LiveCluster) -> None:
    """An all-or-nothing batch asks for its tenants' cards all at once: the total caps, weighed for the batch
    whole before its members are admitted one by one."""
    asked: dict[int, int] = {}
    for placement in batch.placements:
        task = placement.task
        asked[task.tenant_id] = asked.get(task.tenant_id, 0) + live.quotas.estimated_share(task)
    for tenant_id, total in sorted(asked.items()):
        admission = live.quotas.admit(TaskInfo(id=0, tenant_id=tenant_id, gpu_required=1), gpu_type="",
                                      share=total)
        if admission.refusal is not None:
            raise _AllOrNothingRefused(0, BindRefused(reasons.QUOTA_EXCEEDED, admission.refusal))


def _bound(accepted: _Accepted, transaction: int | None) -> BindOutcome:
    item = accepted.claim
    message = f"bound to {accepted.live.name}"
    if item.cards:
        message += f" (cards {', '.join(map(str, item.cards))})"
    if item.port is not None:
        message += f", port {item.port}"
    return BindOutcome(code=reasons.SCHEDULED, message=message, cards=tuple(item.cards), port=item.port,
                       shard=item.shard, card_type=item.card_type, transaction=transaction)
