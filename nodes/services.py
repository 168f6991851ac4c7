"""Writes on nodes: agent registration and heartbeats, the recount ledger, liveness, agent reports, admin edits."""

import hashlib
import logging
import secrets
from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, IntegerField, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from heteroflow_site.errors import DomainError
from nodes.agent.detectors import GPU_TYPES as DETECTION_ORDER
from nodes.models import GPU, Node, NodeAuditEntry, NodeChange
from scheduling import lifecycle
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.loops import final_status_after_stop
from scheduling.models import Task
from scheduling.preemption.settle import settle_preempted
from scheduling.services.task_transition import task_transition
from tenants.models import Tenant

logger = logging.getLogger(__name__)

# Label keys under this prefix belong to the node agent: each heartbeat replaces them; admins set everything else.
AGENT_LABEL_PREFIX = "heteroflow.io/"
NODE_TOKEN_PREFIX = "hfn_"

# The arcs of SPEC §2 that only the node running the container can observe.
AGENT_ARCS: frozenset[tuple[str, str]] = frozenset(
    {
        (lifecycle.SCHEDULED, lifecycle.RUNNING),
        (lifecycle.RUNNING, lifecycle.SUCCEEDED),
        (lifecycle.RUNNING, lifecycle.FAILED),
        (lifecycle.STOPPING, lifecycle.STOPPED),
        (lifecycle.STOPPING, lifecycle.FAILED),
        (lifecycle.PREEMPTING, lifecycle.PENDING),
    }
)

_CARD_FIELDS = ("uuid", "type", "model", "memory_total_mb", "memory_used_mb", "utilization", "temperature", "numa")


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


# Default of optional service arguments whose None is meaningful ("no dedicated tenant").
KEEP = _Keep()


def node_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def agent_register(
    *, name: str, internal_ip: str, public_ip: str | None, cpu_cores: int, memory_gb: int
) -> tuple[Node, str]:
    """Create the node (or take the existing one of that name) and give it a fresh agent token.

    Only the token's hash is stored, so a re-registration invalidates every earlier token of the node.
    """
    token = NODE_TOKEN_PREFIX + secrets.token_urlsafe(32)
    fields = {
        "internal_ip": internal_ip,
        "public_ip": public_ip or None,
        "cpu_cores": cpu_cores,
        "memory_gb": memory_gb,
        "agent_token_hash": node_token_hash(token),
    }
    with transaction.atomic():
        node, created = Node.objects.select_for_update().get_or_create(name=name, defaults=fields)
        if not created:
            Node.objects.filter(id=node.id).update(**fields)
            node.refresh_from_db()
    logger.info("node %s %s; agent token issued", name, "registered" if created else "re-registered")
    return node, token


def node_for_token(token: str) -> Node | None:
    if not token.startswith(NODE_TOKEN_PREFIX):
        return None
    return Node.objects.filter(agent_token_hash=node_token_hash(token)).first()


def node_heartbeat_apply(
    *, node: Node, cpu_percent: float, memory_used_mb: int, gpus: list[dict], labels: dict[str, str]
) -> Node:
    """Record one agent heartbeat (SPEC §14) in one transaction, then reconcile the GPU ledger (SPEC §7).

    `gpus` are validated card dicts keyed like the API (index, uuid, type, ...). The node's card rows become exactly
    those cards; the agent's `heteroflow.io/` labels replace the previous ones while admin labels stay untouched.
    """
    now = timezone.now()
    with transaction.atomic():
        # The lock orders this heartbeat against binds and admin edits of the same node; see node_gpu_used_recount.
        locked = Node.objects.select_for_update().get(id=node.id)
        _sync_cards(locked, gpus)
        merged_labels = merge_heartbeat_labels(current=locked.labels, reported=labels)
        Node.objects.filter(id=node.id).update(
            cpu_percent=cpu_percent,
            memory_used_mb=memory_used_mb,
            gpu_total=len(gpus),
            gpu_type=_majority_gpu_type(gpus),
            labels=merged_labels,
            last_heartbeat_at=now,
        )
        node_gpu_used_recount(node_id=node.id)
        _set_online_or_busy(node.id)
    node.refresh_from_db()
    return node


def _set_online_or_busy(node_id: int) -> None:
    """A reporting node is `busy` while every card is held and `online` otherwise; `offline` is liveness' word."""
    full = Q(gpu_total__gt=0, gpu_used__gte=F("gpu_total"))
    Node.objects.filter(full, id=node_id).exclude(status=Node.Status.BUSY).update(status=Node.Status.BUSY)
    Node.objects.filter(~full, id=node_id).exclude(status=Node.Status.ONLINE).update(status=Node.Status.ONLINE)


def _sync_cards(node: Node, gpus: list[dict]) -> None:
    existing = {card.index: card for card in GPU.objects.filter(node=node)}
    reported = {card["index"]: card for card in gpus}
    removed = sorted(set(existing) - set(reported))
    if removed:
        GPU.objects.filter(node=node, index__in=removed).delete()
    GPU.objects.bulk_create(
        GPU(node=node, **reported[index]) for index in sorted(set(reported) - set(existing))
    )
    changed = []
    for index in sorted(set(reported) & set(existing)):
        card = existing[index]
        if any(getattr(card, name) != reported[index][name] for name in _CARD_FIELDS):
            for name in _CARD_FIELDS:
                setattr(card, name, reported[index][name])
            changed.append(card)
    if changed:
        GPU.objects.bulk_update(changed, _CARD_FIELDS)


def _majority_gpu_type(gpus: list[dict]) -> str:
    """The most common card type; a tie goes to the type detected first on a mixed node (SPEC §1 order)."""
    counts = Counter(card["type"] for card in gpus)
    if not counts:
        return ""
    return max(counts, key=lambda gpu_type: (counts[gpu_type], -DETECTION_ORDER.index(gpu_type)))


def node_gpu_used_recount(*, node_id: int) -> int | None:
    """The heartbeat ledger of SPEC §7: set `gpu_used` to SUM(gpu_required) of the node's active tasks.

    Returns the corrected value, or None when the ledgers agreed. The stored value and the sum are read in one
    statement AFTER taking the node's row lock in an earlier one: a transition that already moved the counter held
    that lock until it committed (so the fresh snapshot sees its task too), one that has not yet moved it must wait
    for us (so we see neither). Reading under `FOR UPDATE` in the same statement would not do: after waiting for the
    lock, PostgreSQL re-reads the node row but keeps the old snapshot for the sum.
    """
    active_gpus = (
        Task.objects.filter(node_id=OuterRef("id"), status__in=ACTIVE_STATES)
        .order_by()
        .values("node_id")
        .annotate(total=Sum("gpu_required"))
        .values("total")
    )
    with transaction.atomic():
        if not Node.objects.select_for_update().filter(id=node_id).exists():
            return None
        row = (
            Node.objects.filter(id=node_id)
            .annotate(recount=Coalesce(Subquery(active_gpus, output_field=IntegerField()), Value(0)))
            .values("name", "gpu_used", "recount")
            .first()
        )
        if row["gpu_used"] == row["recount"]:
            return None
        corrected = Node.objects.filter(id=node_id, gpu_used=row["gpu_used"]).update(gpu_used=row["recount"])
    if corrected:
        logger.warning(
            "gpu_used ledger of node %s disagreed with its active tasks: stored %s, recounted %s; corrected",
            row["name"], row["gpu_used"], row["recount"],
        )
        return row["recount"]
    return None


def nodes_mark_silent_offline(now: datetime | None = None) -> int:
    """SPEC §11 liveness: nodes without a heartbeat for `heartbeat_timeout` seconds go offline; returns how many.

    The conditional UPDATE re-checks the heartbeat time, so a heartbeat landing meanwhile keeps its node online.
    A node that never sent a heartbeat counts from its creation.
    """
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.SCHEDULER["heartbeat_timeout"])
    silent = Node.objects.exclude(status=Node.Status.OFFLINE).filter(
        Q(last_heartbeat_at__lt=cutoff) | Q(last_heartbeat_at__isnull=True, created_at__lt=cutoff)
    )
    names = list(silent.values_list("name", flat=True))
    count = silent.update(status=Node.Status.OFFLINE)
    if count:
        logger.warning("%s node(s) silent for %ss went offline: %s", count, settings.SCHEDULER["heartbeat_timeout"],
                       ", ".join(names))
    return count


class AgentArcRefused(Exception):
    """A node token reported a legal transition that only the control plane may make."""


class NotThisNodesTask(Exception):
    """The task does not exist or belongs to another node."""


def merge_heartbeat_labels(*, current: dict[str, str], reported: dict[str, str]) -> dict[str, str]:
    """Agent-owned `heteroflow.io/` keys follow the agent; any other key it reports (say `rdma`, discovered on the
    host) only fills a gap, because a value an admin set is never overwritten by a heartbeat."""
    admin_labels = {key: value for key, value in current.items() if not key.startswith(AGENT_LABEL_PREFIX)}
    agent_labels = {key: value for key, value in reported.items() if key.startswith(AGENT_LABEL_PREFIX)}
    discovered = {key: value for key, value in reported.items()
                  if not key.startswith(AGENT_LABEL_PREFIX) and key not in admin_labels}
    return {**admin_labels, **discovered, **agent_labels}


def agent_report_status(*, node: Node, task_id: int, from_status: str, to_status: str, reason: str = "") -> bool:
    """Apply an agent's report on one of its tasks; True if the CAS won (SPEC §2, §9).

    Raises IllegalTransition for a pair outside the state machine, AgentArcRefused for a legal arc the agent does
    not own and NotThisNodesTask for another node's task. The task row stays locked while the transition runs, so
    the task cannot be re-bound to another node between the ownership check and the CAS.
    """
    lifecycle.check_transition(from_status, to_status)
    if (from_status, to_status) not in AGENT_ARCS:
        raise AgentArcRefused(f"agents may not report {from_status} → {to_status}")
    with transaction.atomic():
        placed_on = Task.objects.select_for_update().filter(id=task_id).values_list("node_id", flat=True).first()
        if placed_on is None and not Task.objects.filter(id=task_id).exists():
            raise NotThisNodesTask(task_id)
        if placed_on is not None and placed_on != node.id:
            raise NotThisNodesTask(task_id)
        if placed_on is None:
            # Back in the queue (e.g. a preemption the watchdog already settled): this report comes too late.
            return False
        if (from_status, to_status) == (lifecycle.PREEMPTING, lifecycle.PENDING):
            # The settlement (placement, counters, preempt_count) belongs to the preemption module; its CAS makes a
            # report that arrives after the watchdog change nothing.
            return settle_preempted(task_id, reason=reason)
        if (from_status, to_status) == (lifecycle.STOPPING, lifecycle.STOPPED):
            # A stop the scheduler ordered for a timeout ends as a failure with that reason (SPEC §11).
            stopping = Task.objects.only("reason").get(id=task_id)
            if final_status_after_stop(stopping) == lifecycle.FAILED:
                return task_transition(task_id, from_status, lifecycle.FAILED, reason=stopping.reason)
        return task_transition(task_id, from_status, to_status, reason=reason)


def node_topology_update(*, node: Node, region: str, zone: str, rack: str, actor=None) -> Node:
    """Set where the node stands (SPEC §6 topology plugin); audited."""
    return _node_admin_change(
        node=node, action="node.topology", changes={"region": region, "zone": zone, "rack": rack}, actor=actor
    )


def node_update(
    *, node: Node, labels: dict[str, str] | None = None, schedulable: bool | None = None,
    dedicated_tenant: Tenant | None | _Keep = KEEP, actor=None,
) -> Node:
    """Admin edits of a node; audited. `labels` replaces the admin labels, the agent's `heteroflow.io/` ones stay.

    `dedicated_tenant=None` removes the dedication; leaving it out keeps the current one.
    """
    if labels is not None:
        agent_keys = sorted(key for key in labels if key.startswith(AGENT_LABEL_PREFIX))
        if agent_keys:
            raise DomainError(f"labels under {AGENT_LABEL_PREFIX} are set by the node agent: {', '.join(agent_keys)}",
                              field="labels")
    changes: dict = {}
    if schedulable is not None:
        changes["schedulable"] = schedulable
    if not isinstance(dedicated_tenant, _Keep):
        changes["dedicated_tenant_id"] = dedicated_tenant.id if dedicated_tenant is not None else None
    return _node_admin_change(node=node, action="node.update", changes=changes, labels=labels, actor=actor)


def _node_admin_change(*, node: Node, action: str, changes: dict, actor, labels: dict | None = None) -> Node:
    with transaction.atomic():
        locked = Node.objects.select_for_update().get(id=node.id)
        if labels is not None:
            agent_labels = {key: value for key, value in locked.labels.items() if key.startswith(AGENT_LABEL_PREFIX)}
            changes = {**changes, "labels": {**labels, **agent_labels}}
        before = {name: getattr(locked, name) for name in changes}
        after = {name: value for name, value in changes.items() if before[name] != value}
        if after:
            Node.objects.filter(id=node.id).update(**after)
            NodeAuditEntry.objects.create(
                node=locked, actor=actor, action=action,
                before={name: before[name] for name in after}, after=after,
            )
    node.refresh_from_db()
    return node


def node_changes_prune(*, older_than: timedelta) -> int:
    """Forget node changes logged more than `older_than` ago; how many. A reader whose last look is older than that
    must build afresh instead of asking what changed."""
    deleted, _ = NodeChange.objects.filter(at__lt=timezone.now() - older_than).delete()
    return deleted
