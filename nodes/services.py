"""Writes on nodes: agent registration and heartbeats, liveness, admin edits."""

import hashlib
import logging
import secrets
from collections import Counter
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from heteroflow_site.errors import Conflict, DomainError, NotAllowed
from heteroflow_site.sentinels import KEEP, Keep
from nodes.agent.detectors import GPU_TYPES as DETECTION_ORDER
from nodes.card_health import cards_health_record, quarantined_cards_kept
from nodes.models import GPU, CardHealth, LivenessClock, Node, NodeAuditEntry, NodeChange
from nodes.signals import heartbeat_recorded, node_cards_changed, node_changed
from tenants.models import Tenant

logger = logging.getLogger(__name__)

# Label keys under this prefix belong to the node agent: each heartbeat replaces them; admins set everything else.
AGENT_LABEL_PREFIX = "heteroflow.io/"
NODE_TOKEN_PREFIX = "hfn_"

_CARD_FIELDS = ("uuid", "type", "model", "memory_total_mb", "memory_used_mb", "utilization", "temperature", "numa")


def node_token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class ReRegistrationRefused(Exception):
    """An existing node name may be registered again only by an admin or by that node's own agent (design §15.8)."""


JOIN_AWAITING_APPROVAL_ACTION = "node.join"


def agent_register(
    *, name: str, internal_ip: str, public_ip: str | None, cpu_cores: int, memory_gb: int,
    by_admin: bool = False, by_node: Node | None = None, by_join_token: bool = False,
) -> tuple[Node, str]:
    """Create the node (or take the existing one of that name) and give it a fresh agent token.

    Only an admin (`by_admin`) or the node itself (`by_node`) may take an existing name: the join token creates new
    nodes only, so whoever holds it cannot take over a running node and its tasks. Only the token's hash is stored,
    so a re-registration invalidates every earlier token of the node. A node the join token created starts
    unschedulable until an admin approves it (makes it schedulable), unless `HETEROFLOW_JOIN_AUTO_APPROVE` (design
    §16.5): otherwise a stolen join token would attract other tenants' images, commands and env at once.
    """
    token = NODE_TOKEN_PREFIX + secrets.token_urlsafe(32)
    fields = {
        "internal_ip": internal_ip,
        "public_ip": public_ip or None,
        "cpu_cores": cpu_cores,
        "memory_gb": memory_gb,
        "agent_token_hash": node_token_hash(token),
    }
    awaits_approval = by_join_token and not by_admin and not settings.HETEROFLOW_JOIN_AUTO_APPROVE
    with transaction.atomic():
        node, created = Node.objects.select_for_update().get_or_create(
            name=name, defaults={**fields, "schedulable": not awaits_approval})
        if not created and not by_admin and (by_node is None or by_node.id != node.id):
            raise ReRegistrationRefused(f"a node named {name!r} is registered; registering it again needs an admin "
                                        "token or that node's own token")
        if created and by_node is not None and not by_admin:
            raise ReRegistrationRefused("a node token may re-register only its own node")
        if not created:
            Node.objects.filter(id=node.id).update(**fields)
            node.refresh_from_db()
        elif awaits_approval:
            NodeAuditEntry.objects.create(node=node, action=JOIN_AWAITING_APPROVAL_ACTION, before={},
                                          after={"schedulable": False, "awaiting": "an admin's approval"})
    logger.info("node %s %s; agent token issued", name, "registered" if created else "re-registered")
    return node, token


def node_for_token(token: str) -> Node | None:
    if not token.startswith(NODE_TOKEN_PREFIX):
        return None
    return Node.objects.filter(agent_token_hash=node_token_hash(token)).first()


def node_heartbeat_apply(
    *, node: Node, cpu_percent: float, memory_used_mb: int, gpus: list[dict], labels: dict[str, str]
) -> Node:
    """Record one agent heartbeat in one transaction; `heartbeat_recorded` lets scheduling recount the GPU ledger.

    `gpus` are validated card dicts keyed like the API (index, uuid, type, ...). The node's card rows become exactly
    those cards; the agent's `heteroflow.io/` labels replace the previous ones while admin labels stay untouched.
    """
    now = timezone.now()
    with transaction.atomic():
        # The lock orders this heartbeat against binds and admin edits of the same node; see scheduling's
        # node_gpu_used_recount.
        locked = Node.objects.select_for_update().get(id=node.id)
        _sync_cards(locked, gpus, now=now)
        merged_labels = merge_heartbeat_labels(current=locked.labels, reported=labels)
        gpu_type = _majority_gpu_type(gpus)
        Node.objects.filter(id=node.id).update(
            cpu_percent=cpu_percent,
            memory_used_mb=memory_used_mb,
            gpu_total=len(gpus),
            gpu_type=gpu_type,
            labels=merged_labels,
            last_heartbeat_at=now,
        )
        heartbeat_recorded.send(sender=Node, node_id=node.id)
        _set_online_or_busy(node.id)
        if (locked.status == Node.Status.OFFLINE or locked.labels != merged_labels
                or (locked.gpu_total, locked.gpu_type) != (len(gpus), gpu_type)):
            node_changed.send(sender=Node, node_id=node.id, reason=f"node {locked.name} heartbeat")
        if locked.last_heartbeat_at is not None and abs(len(gpus) - locked.gpu_total) > 1:
            _cards_changed(locked, len(gpus))
    node.refresh_from_db()
    return node


CARDS_CHANGED_ACTION = "node.cards_changed"


def _cards_changed(node: Node, cards_after: int) -> None:
    """A node reports more than one card more or fewer than before: hardware rarely does that, a node token claiming
    cards it lacks (to attract other tenants' work) does. Audited, logged and notified (design §16.5)."""
    NodeAuditEntry.objects.create(node=node, action=CARDS_CHANGED_ACTION, before={"gpu_total": node.gpu_total},
                                  after={"gpu_total": cards_after})
    logger.warning("node %s reported %s cards, %s before", node.name, cards_after, node.gpu_total)
    transaction.on_commit(lambda: node_cards_changed.send(sender=Node, node_id=node.id, name=node.name,
                                                          cards_before=node.gpu_total, cards_after=cards_after))


def _set_online_or_busy(node_id: int) -> None:
    """A reporting node is `busy` while every card is held and `online` otherwise; `offline` is liveness' word."""
    full = Q(gpu_total__gt=0, gpu_used__gte=F("gpu_total"))
    Node.objects.filter(full, id=node_id).exclude(status=Node.Status.BUSY).update(status=Node.Status.BUSY)
    Node.objects.filter(~full, id=node_id).exclude(status=Node.Status.ONLINE).update(status=Node.Status.ONLINE)


def _sync_cards(node: Node, gpus: list[dict], *, now: datetime) -> None:
    """Make the node's card rows exactly `gpus`, matched by `(type, index)`: each vendor numbers from 0 (§15.3).

    A quarantined card the tool stops listing keeps its row (design §17.3: a card off the bus vanishes from its
    tool, and its quarantine must not vanish with it). Each card's health reading goes to `cards_health_record`.
    """
    existing = {(card.type, card.index): card for card in GPU.objects.filter(node=node)}
    readings = {(card["type"], card["index"]): {"health": card.pop("health", CardHealth.OK),
                                                "errors": card.pop("errors", [])} for card in gpus}
    reported = {(card["type"], card["index"]): card for card in gpus}
    kept = quarantined_cards_kept(node=node, reported=reported)
    removed = [existing[key].id for key in sorted(set(existing) - set(reported) - kept)]
    if removed:
        GPU.objects.filter(id__in=removed).delete()
    created = GPU.objects.bulk_create(GPU(node=node, **reported[key]) for key in sorted(set(reported) - set(existing)))
    changed = []
    for key in sorted(set(reported) & set(existing)):
        card = existing[key]
        if any(getattr(card, name) != reported[key][name] for name in _CARD_FIELDS):
            for name in _CARD_FIELDS:
                setattr(card, name, reported[key][name])
            changed.append(card)
    if changed:
        GPU.objects.bulk_update(changed, _CARD_FIELDS)
    cards = {key: card for key, card in existing.items() if key in reported or key in kept}
    cards.update({(card.type, card.index): card for card in created})
    cards_health_record(node=node, cards=cards, reported=readings, now=now)


def _majority_gpu_type(gpus: list[dict]) -> str:
    """The most common card type; a tie goes to the type detected first on a mixed node (DETECTION_ORDER)."""
    counts = Counter(card["type"] for card in gpus)
    if not counts:
        return ""
    return max(counts, key=lambda gpu_type: (counts[gpu_type], -DETECTION_ORDER.index(gpu_type)))


def nodes_mark_silent_offline(now: datetime | None = None) -> int:
    """Liveness: nodes without a heartbeat for `heartbeat_timeout` seconds go offline; returns how many.

    The conditional UPDATE re-checks the heartbeat time, so a heartbeat landing meanwhile keeps its node online.
    A node that never sent a heartbeat counts from its creation.
    """
    now = now or timezone.now()
    timeout = timedelta(seconds=settings.SCHEDULER["heartbeat_timeout"])
    with transaction.atomic():
        reachable_since = _note_database_reachable(now, gap=timeout)
    if now - reachable_since < timeout:
        logger.info("liveness: the database is reachable again since %s; nodes get %ss to report first",
                    reachable_since, timeout.seconds)
        return 0
    cutoff = now - timeout
    silent = Node.objects.exclude(status=Node.Status.OFFLINE).filter(
        Q(last_heartbeat_at__lt=cutoff) | Q(last_heartbeat_at__isnull=True, created_at__lt=cutoff)
    )
    names = list(silent.values_list("name", flat=True))
    count = silent.update(status=Node.Status.OFFLINE)
    if count:
        logger.warning("%s node(s) silent for %ss went offline: %s", count, settings.SCHEDULER["heartbeat_timeout"],
                       ", ".join(names))
    return count


def _note_database_reachable(now: datetime, *, gap: timedelta) -> datetime:
    """Record that the loop reaches the database at `now`; returns since when it has without a gap longer than `gap`
    (on the very first run: since long enough to judge)."""
    clock, created = LivenessClock.objects.select_for_update().get_or_create(
        key="liveness", defaults={"last_reachable_at": now, "reachable_since": now - gap})
    if not created:
        if now - clock.last_reachable_at > gap:
            logger.warning("liveness: no run reached the database between %s and %s", clock.last_reachable_at, now)
            clock.reachable_since = now
        clock.last_reachable_at = max(now, clock.last_reachable_at)
        clock.save(update_fields=["last_reachable_at", "reachable_since"])
    return clock.reachable_since


def merge_heartbeat_labels(*, current: dict[str, str], reported: dict[str, str]) -> dict[str, str]:
    """Agent-owned `heteroflow.io/` keys follow the agent; any other key it reports (say `rdma`, discovered on the
    host) only fills a gap, because a value an admin set is never overwritten by a heartbeat."""
    admin_labels = {key: value for key, value in current.items() if not key.startswith(AGENT_LABEL_PREFIX)}
    agent_labels = {key: value for key, value in reported.items() if key.startswith(AGENT_LABEL_PREFIX)}
    discovered = {key: value for key, value in reported.items()
                  if not key.startswith(AGENT_LABEL_PREFIX) and key not in admin_labels}
    return {**admin_labels, **discovered, **agent_labels}


def node_topology_update(*, node: Node, region: str, zone: str, rack: str, actor=None) -> Node:
    """Set where the node stands (read by the topology plugin); audited."""
    return _node_admin_change(
        node=node, action="node.topology", changes={"region": region, "zone": zone, "rack": rack}, actor=actor
    )


def node_update(
    *, node: Node, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
    schedulable: bool | None = None, dedicated_tenant: Tenant | None | Keep = KEEP, actor=None,
) -> Node:
    """Admin edits of a node; audited. `labels` replaces the admin labels, the agent's `heteroflow.io/` ones stay.

    `taints` replaces the node's taints (design §16.3). `dedicated_tenant=None` removes the dedication; leaving it out
    keeps the current one.
    """
    if labels is not None:
        agent_keys = sorted(key for key in labels if key.startswith(AGENT_LABEL_PREFIX))
        if agent_keys:
            raise NotAllowed(f"labels under {AGENT_LABEL_PREFIX} are set by the node agent: {', '.join(agent_keys)}",
                              field="labels")
    changes: dict = {}
    if taints is not None:
        changes["taints"] = [dict(taint) for taint in taints]
    if schedulable is not None:
        changes["schedulable"] = schedulable
    if not isinstance(dedicated_tenant, Keep):
        changes["dedicated_tenant_id"] = dedicated_tenant.id if dedicated_tenant is not None else None
    return _node_admin_change(node=node, action="node.update", changes=changes, labels=labels, actor=actor)


def tenant_dedicated_nodes_set(*, tenant: Tenant, node_names: list[str], actor=None) -> list[Node]:
    """The nodes named become the ones dedicated to `tenant` and those left out are shared again, each change
    audited as the node page's (design §16.3). A node dedicated to another tenant is refused, not taken: its tenant
    would lose it unawares. Refusals name the field `dedicated_nodes`."""
    names = set(node_names)
    with transaction.atomic():
        # Locked in one order, so that two edits touching the same nodes wait for each other instead of deadlocking.
        nodes = list(Node.objects.select_for_update(of=("self",)).select_related("dedicated_tenant")
                     .filter(Q(name__in=names) | Q(dedicated_tenant=tenant)).order_by("id"))
        missing = sorted(names - {node.name for node in nodes})
        if missing:
            raise DomainError(f"no node named {', '.join(missing)}", field="dedicated_nodes")
        taken = [node for node in nodes if node.name in names and node.dedicated_tenant_id not in (None, tenant.id)]
        if taken:
            raise Conflict("; ".join(f"{node.name} is dedicated to {node.dedicated_tenant.name}" for node in taken)
                           + ": make it shared again on its node page first", field="dedicated_nodes")
        for node in nodes:
            if (node.name in names) != (node.dedicated_tenant_id == tenant.id):
                node_update(node=node, dedicated_tenant=tenant if node.name in names else None, actor=actor)
    return [node for node in nodes if node.name in names]


NODE_APPROVED_ACTION = "node.approve"


def node_approve(*, node: Node, actor) -> Node:
    """An admin approves a node the join token registered: it becomes schedulable (design §16.5); audited."""
    return _node_admin_change(node=node, action=NODE_APPROVED_ACTION, changes={"schedulable": True}, actor=actor)


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
            node_changed.send(sender=Node, node_id=node.id, reason=f"{action} of node {locked.name}")
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
