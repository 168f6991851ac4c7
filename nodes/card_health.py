"""Writes on card health (design §17.3): what each heartbeat reports per card, the quarantine of a `failed` card,
its release by an admin or after `HETEROFLOW_CARD_AUTO_RELEASE` seconds of healthy reports, and the history."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from heteroflow_site.errors import Conflict
from nodes.models import GPU, CardHealth, CardHealthEvent, Node, NodeAuditEntry
from nodes.signals import card_quarantined_notice, cards_quarantined, node_changed

logger = logging.getLogger(__name__)

# Errors a heartbeat may carry per card: the newest ones, enough to show what led to a verdict.
ERRORS_PER_CARD = 16
CARD_RELEASED_ACTION = "node.card_released"
NOT_REPORTED_ERROR = {"code": "not-reported", "message": "the card is no longer reported by the vendor's tool",
                      "at": None}


def cards_health_record(*, node: Node, cards: dict[tuple[str, int], GPU], reported: dict[tuple[str, int], dict],
                        now: datetime) -> list[tuple[str, int]]:
    """Take one heartbeat's health readings of the node's cards (the node's row is locked by the caller): health
    changes go to the history, a `failed` card is quarantined, a healthy one may be auto-released. Returns the cards
    quarantined now."""
    quarantined: list[tuple[str, int]] = []
    released: list[GPU] = []
    events: list[CardHealthEvent] = []
    auto_release = settings.HETEROFLOW_CARD_AUTO_RELEASE
    for key, card in cards.items():
        reading = reported.get(key)
        health = reading["health"] if reading else CardHealth.FAILED
        errors = (reading["errors"] if reading else [NOT_REPORTED_ERROR])[-ERRORS_PER_CARD:]
        changes: dict = {}
        if health != card.health:
            changes.update(health=health, health_changed_at=now,
                           healthy_since=now if health == CardHealth.OK else None)
            events.append(CardHealthEvent(node=node, card_type=key[0], card_index=key[1], health=health,
                                          errors=errors, kind=CardHealthEvent.Kind.REPORTED))
        elif health == CardHealth.OK and card.healthy_since is None:
            changes["healthy_since"] = now
        if errors and errors[-1] != card.last_error:
            changes["last_error"] = errors[-1]
        if health == CardHealth.FAILED and card.quarantined_at is None:
            reason = _quarantine_reason(errors)
            # Compare-and-swap: of two writers only the one that finds the card unquarantined quarantines it.
            if GPU.objects.filter(id=card.id, quarantined_at__isnull=True).update(
                    quarantined_at=now, quarantine_reason=reason):
                quarantined.append(key)
                events.append(CardHealthEvent(node=node, card_type=key[0], card_index=key[1], health=health,
                                              errors=errors, kind=CardHealthEvent.Kind.QUARANTINED))
                transaction.on_commit(lambda key=key, reason=reason: card_quarantined_notice.send(
                    sender=Node, node_id=node.id, name=node.name, card_type=key[0], index=key[1], reason=reason))
        elif (auto_release and card.quarantined_at is not None and health == CardHealth.OK
              and (changes.get("healthy_since") or card.healthy_since) is not None
              and now - (changes.get("healthy_since") or card.healthy_since) >= timedelta(seconds=auto_release)):
            released.append(card)
        if changes:
            GPU.objects.filter(id=card.id).update(**changes)
    for card in released:
        if _release(card, node=node, actor=None, why=f"healthy for {auto_release} s"):
            events.append(CardHealthEvent(node=node, card_type=card.type, card_index=card.index,
                                          health=CardHealth.OK, kind=CardHealthEvent.Kind.RELEASED))
    CardHealthEvent.objects.bulk_create(events)
    if quarantined:
        logger.warning("node %s: card(s) %s failed and are quarantined", node.name,
                       ", ".join(f"{card_type}{index}" for card_type, index in quarantined))
        cards_quarantined.send(sender=Node, node_id=node.id, cards=quarantined)
    if released:
        node_changed.send(sender=Node, node_id=node.id, reason=f"card(s) of node {node.name} released")
    return quarantined


def _quarantine_reason(errors: list[dict]) -> str:
    if not errors:
        return "the card reported failed"
    return f"{errors[-1]['code']}: {errors[-1]['message']}"[:500]


def _release(card: GPU, *, node: Node, actor, why: str) -> bool:
    won = GPU.objects.filter(id=card.id, quarantined_at__isnull=False).update(quarantined_at=None,
                                                                             quarantine_reason="")
    if won:
        NodeAuditEntry.objects.create(node=node, actor=actor, action=CARD_RELEASED_ACTION,
                                      before={"card": f"{card.type}{card.index}", "quarantined": True},
                                      after={"quarantined": False, "why": why})
    return bool(won)


def card_release(*, node: Node, card: GPU, actor) -> GPU:
    """An admin releases a quarantined card (design §17.3); audited, in the history. A card that is not quarantined
    (409), or that still reports `failed` and would be quarantined again at the next heartbeat (409), is refused."""
    with transaction.atomic():
        locked = GPU.objects.select_for_update().get(id=card.id, node=node)
        if locked.quarantined_at is None:
            raise Conflict(f"card {locked.type}{locked.index} of node {node.name} is not quarantined", field="card")
        if locked.health == CardHealth.FAILED:
            raise Conflict(f"card {locked.type}{locked.index} of node {node.name} still reports failed; it would be "
                           "quarantined again at the next heartbeat", field="card")
        _release(locked, node=node, actor=actor, why="released by an admin")
        CardHealthEvent.objects.create(node=node, card_type=locked.type, card_index=locked.index,
                                       health=locked.health, kind=CardHealthEvent.Kind.RELEASED, actor=actor)
        node_changed.send(sender=Node, node_id=node.id, reason=f"card {locked.type}{locked.index} of node "
                                                                 f"{node.name} released")
    locked.refresh_from_db()
    return locked


def quarantined_cards_kept(*, node: Node, reported: dict[tuple[str, int], dict]) -> set[tuple[str, int]]:
    """Quarantined cards the tool no longer lists (a card off the bus vanishes from it): their rows stay, so the
    quarantine, its history and the admin's release survive until an admin releases them."""
    return {(card_type, index) for card_type, index in
            GPU.objects.filter(node=node, quarantined_at__isnull=False).values_list("type", "index")
            if (card_type, index) not in reported}

