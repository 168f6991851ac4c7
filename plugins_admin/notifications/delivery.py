"""Notification plugins: tell a webhook or a mailbox when a task fails, is preempted or succeeds, when a node's
reported cards change by more than a card (design §16.5: a node token claiming cards it does not have), when a card
is quarantined and when a drain ends (design §17.3).

Delivery runs in a Celery task so that neither the request path nor the scheduler ever waits on a remote server;
a delivery failure is logged and dropped, never raised into the code that moved the task.
"""

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

import requests
from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.dispatch import receiver
from django.utils import timezone

from nodes.signals import card_quarantined_notice, node_cards_changed, node_drained
from plugins_admin.models import NotificationChannel
from scheduling import lifecycle
from scheduling.models import Task
from scheduling.signals import task_transitioned

logger = logging.getLogger(__name__)

EVENT_FAILED = "failed"
EVENT_PREEMPTED = "preempted"
EVENT_SUCCEEDED = "succeeded"
EVENT_TEST = "test"
TASK_EVENTS = (EVENT_FAILED, EVENT_PREEMPTED, EVENT_SUCCEEDED)
EVENT_NODE_CARDS_CHANGED = "node-cards-changed"
EVENT_CARD_QUARANTINED = "card-quarantined"
EVENT_NODE_DRAINED = "node-drained"
# What a channel may subscribe to.
CHANNEL_EVENTS = (*TASK_EVENTS, EVENT_NODE_CARDS_CHANGED, EVENT_CARD_QUARANTINED, EVENT_NODE_DRAINED)

# Long enough for a healthy receiver, short enough that a dead one cannot pile up worker slots.
WEBHOOK_TIMEOUT_SECONDS = 5


@dataclass(frozen=True)
class DeliveryResult:
    ok: bool
    detail: str


def task_event_for(*, from_status: str, to_status: str) -> str | None:
    """The notification event a transition stands for; a settled preemption is the arc preempting → pending."""
    if to_status == lifecycle.FAILED:
        return EVENT_FAILED
    if to_status == lifecycle.SUCCEEDED:
        return EVENT_SUCCEEDED
    if from_status == lifecycle.PREEMPTING and to_status == lifecycle.PENDING:
        return EVENT_PREEMPTED
    return None


def email_addresses(target: str) -> list[str]:
    return [address.strip() for address in target.split(",") if address.strip()]


def _subscribed_kinds(event: str) -> list[str]:
    return [channel.kind for channel in NotificationChannel.objects.filter(enabled=True).only("kind", "events")
            if event in channel.events]


@receiver(task_transitioned, dispatch_uid="plugins_admin.notifications.queue_task_notifications")
def queue_task_notifications(sender, *, task_id: int, from_status: str, to_status: str, reason: str = "", **kwargs):
    event = task_event_for(from_status=from_status, to_status=to_status)
    if event is None:
        return
    try:
        for kind in _subscribed_kinds(event):
            deliver_task_notification.delay(
                kind=kind, event=event, task_id=task_id, status=to_status, reason=reason,
                at=timezone.now().isoformat(),
            )
    except Exception:
        logger.exception("could not queue %s notifications for task %s", event, task_id)


@receiver(node_cards_changed, dispatch_uid="plugins_admin.notifications.queue_node_cards_notifications")
def queue_node_cards_notifications(sender, *, node_id: int, name: str, cards_before: int, cards_after: int,
                                   **kwargs):
    try:
        payload = {"event": EVENT_NODE_CARDS_CHANGED,
                   "node": {"id": node_id, "name": name, "cards_before": cards_before, "cards_after": cards_after},
                   "at": timezone.now().isoformat()}
        for kind in _subscribed_kinds(EVENT_NODE_CARDS_CHANGED):
            deliver_notification.delay(kind=kind, payload=payload)
    except Exception:
        logger.exception("could not queue the cards notification of node %s", node_id)


@receiver(card_quarantined_notice, dispatch_uid="plugins_admin.notifications.queue_card_quarantined_notifications")
def queue_card_quarantined_notifications(sender, *, node_id: int, name: str, card_type: str, index: int, reason: str,
                                         **kwargs):
    _queue_node_notification(EVENT_CARD_QUARANTINED, {"id": node_id, "name": name, "card": f"{card_type}{index}",
                                                      "reason": reason})


@receiver(node_drained, dispatch_uid="plugins_admin.notifications.queue_node_drained_notifications")
def queue_node_drained_notifications(sender, *, node_id: int, name: str, **kwargs):
    _queue_node_notification(EVENT_NODE_DRAINED, {"id": node_id, "name": name})


def _queue_node_notification(event: str, node: dict) -> None:
    try:
        payload = {"event": event, "node": node, "at": timezone.now().isoformat()}
        for kind in _subscribed_kinds(event):
            deliver_notification.delay(kind=kind, payload=payload)
    except Exception:
        logger.exception("could not queue the %s notification of node %s", event, node["id"])


@shared_task(name="plugins_admin.notifications.deliver_notification", ignore_result=True)
def deliver_notification(*, kind: str, payload: dict) -> None:
    channel = NotificationChannel.objects.filter(kind=kind, enabled=True).first()
    if channel is None or not channel.target:
        return
    result = deliver(channel, payload)
    if not result.ok:
        logger.warning("%s notification via %s failed: %s", payload["event"], kind, result.detail)


@shared_task(name="plugins_admin.notifications.deliver_task_notification", ignore_result=True)
def deliver_task_notification(*, kind: str, event: str, task_id: int, status: str, reason: str, at: str) -> None:
    channel = NotificationChannel.objects.filter(kind=kind, enabled=True).first()
    if channel is None or not channel.target:
        return
    task = Task.objects.select_related("tenant").filter(id=task_id).first()
    if task is None:
        logger.warning("task %s vanished before its %s notification was sent", task_id, event)
        return
    payload = {
        "event": event,
        "task": {"id": task.id, "name": task.name, "tenant": task.tenant.name, "status": status, "reason": reason},
        "at": at,
    }
    result = deliver(channel, payload)
    if not result.ok:
        logger.warning("%s notification of task %s via %s failed: %s", event, task_id, kind, result.detail)


def sample_payload(*, at: datetime | None = None) -> dict:
    """What "send a test" delivers: the shape of a real notification, marked as a test."""
    return {
        "event": EVENT_TEST,
        "task": {"id": 0, "name": "heteroflow-test", "tenant": "", "status": lifecycle.SUCCEEDED,
                 "reason": "test notification from the HeteroFlow plugins page"},
        "at": (at or timezone.now()).isoformat(),
    }


def deliver(channel: NotificationChannel, payload: dict) -> DeliveryResult:
    """Send one notification through `channel` now; never raises."""
    try:
        if channel.kind == NotificationChannel.Kind.WEBHOOK:
            return _post_webhook(channel.target, payload)
        return _send_email(email_addresses(channel.target), payload)
    except Exception as exc:  # a notification must never break its caller
        logger.exception("notification via %s failed", channel.kind)
        return DeliveryResult(ok=False, detail=f"{type(exc).__name__}: {exc}")


def masked_url(url: str) -> str:
    """A webhook URL as logs and the plugin history show it: its path, query and credentials often are the secret
    (Slack, Teams and most chat hooks), so only the scheme and host remain (design §16.5)."""
    parts = urlsplit(url)
    if not parts.hostname:
        return "…"
    port = f":{parts.port}" if parts.port else ""
    hidden = "/…" if (parts.path not in ("", "/") or parts.query or parts.username) else ""
    return f"{parts.scheme}://{parts.hostname}{port}{hidden}"


def _post_webhook(url: str, payload: dict) -> DeliveryResult:
    try:
        response = requests.post(url, json=payload, timeout=WEBHOOK_TIMEOUT_SECONDS)
    except requests.RequestException as exc:
        return DeliveryResult(ok=False, detail=f"could not reach {masked_url(url)}: {type(exc).__name__}")
    elapsed_ms = int(response.elapsed.total_seconds() * 1000)
    if response.ok:
        return DeliveryResult(ok=True, detail=f"HTTP {response.status_code} in {elapsed_ms} ms")
    return DeliveryResult(ok=False, detail=f"HTTP {response.status_code} {response.reason} from {masked_url(url)}")


def _send_email(addresses: list[str], payload: dict) -> DeliveryResult:
    if "node" in payload:
        node = payload["node"]
        subject = f"[HeteroFlow] node {node['name']} {payload['event']}"
        about = [f"Node:   {node['name']} (#{node['id']})"]
        if "cards_before" in node:
            about.append(f"Cards:  {node['cards_before']} -> {node['cards_after']}")
        if "card" in node:
            about += [f"Card:   {node['card']}", f"Reason: {node['reason']}"]
    else:
        task = payload["task"]
        subject = f"[HeteroFlow] task {task['name']} {payload['event']}"
        about = [f"Task:   {task['name']} (#{task['id']})", f"Tenant: {task['tenant'] or '-'}",
                 f"Status: {task['status']}", f"Reason: {task['reason'] or '-'}"]
    lines = [f"Event:  {payload['event']}", *about, f"At:     {payload['at']}", "", json.dumps(payload, indent=2)]
    sent = send_mail(subject, "\n".join(lines), settings.DEFAULT_FROM_EMAIL, addresses, fail_silently=False)
    if sent:
        return DeliveryResult(ok=True, detail=f"sent to {', '.join(addresses)}")
    return DeliveryResult(ok=False, detail="the mail backend accepted no message")
