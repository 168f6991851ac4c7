import logging

import pytest
from django.core import mail

from heteroflow_site.errors import DomainError
from plugins_admin.notifications.delivery import task_event_for
from plugins_admin.notifications.services import notification_channel_test, notification_channel_update
from scheduling import lifecycle
from scheduling.services.task_transition import task_transition
from tests.factories import make_node, make_task

pytestmark = pytest.mark.django_db


@pytest.fixture
def running_task(tenant):
    node = make_node(cards=2, gpu_used=1)
    return make_task(tenant=tenant, name="train-resnet", status=lifecycle.RUNNING, node=node, gpus=[0], gpu_required=1)


@pytest.fixture
def webhook_on(admin_user, webhook_receiver):
    return notification_channel_update(kind="webhook", enabled=True, target=webhook_receiver.url,
                                       events=["failed", "preempted", "succeeded"], actor=admin_user)


@pytest.fixture
def email_on(settings, admin_user):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    return notification_channel_update(kind="email", enabled=True, target="ops@example.com, oncall@example.com",
                                       events=["failed"], actor=admin_user)


def _move(task, *arcs, reason="", capture):
    with capture(execute=True):
        for from_status, to_status in arcs:
            assert task_transition(task.id, from_status, to_status, reason=reason)


@pytest.mark.parametrize("from_status, to_status, event", [
    (lifecycle.RUNNING, lifecycle.FAILED, "failed"),
    (lifecycle.STOPPING, lifecycle.FAILED, "failed"),
    (lifecycle.RUNNING, lifecycle.SUCCEEDED, "succeeded"),
    (lifecycle.PREEMPTING, lifecycle.PENDING, "preempted"),
    (lifecycle.SCHEDULED, lifecycle.PENDING, None),
    (lifecycle.STOPPING, lifecycle.STOPPED, None),
    (lifecycle.RUNNING, lifecycle.PREEMPTING, None),
    (lifecycle.PENDING, lifecycle.SCHEDULED, None),
])
def test_which_transitions_are_notified(from_status, to_status, event):
    assert task_event_for(from_status=from_status, to_status=to_status) == event


def test_a_failed_task_is_posted_to_the_webhook(webhook_on, webhook_receiver, running_task,
                                                django_capture_on_commit_callbacks):
    _move(running_task, (lifecycle.RUNNING, lifecycle.FAILED), reason="ExitCode137",
          capture=django_capture_on_commit_callbacks)

    [request] = webhook_receiver.requests
    assert request["path"] == "/hook"
    assert request["content_type"] == "application/json"
    body = request["json"]
    assert body["event"] == "failed"
    assert body["task"] == {"id": running_task.id, "name": "train-resnet", "tenant": "acme", "status": "failed",
                            "reason": "ExitCode137"}
    assert body["at"]


def test_a_settled_preemption_is_posted_as_preempted(webhook_on, webhook_receiver, running_task,
                                                     django_capture_on_commit_callbacks):
    _move(running_task, (lifecycle.RUNNING, lifecycle.PREEMPTING), (lifecycle.PREEMPTING, lifecycle.PENDING),
          capture=django_capture_on_commit_callbacks)

    assert [request["json"]["event"] for request in webhook_receiver.requests] == ["preempted"]
    assert webhook_receiver.requests[0]["json"]["task"]["status"] == "pending"


def test_a_succeeded_task_is_posted(webhook_on, webhook_receiver, running_task, django_capture_on_commit_callbacks):
    _move(running_task, (lifecycle.RUNNING, lifecycle.SUCCEEDED), capture=django_capture_on_commit_callbacks)

    assert [request["json"]["event"] for request in webhook_receiver.requests] == ["succeeded"]


def test_only_subscribed_events_of_enabled_channels_are_sent(admin_user, webhook_receiver, running_task,
                                                             django_capture_on_commit_callbacks):
    notification_channel_update(kind="webhook", enabled=True, target=webhook_receiver.url, events=["succeeded"],
                                actor=admin_user)
    _move(running_task, (lifecycle.RUNNING, lifecycle.FAILED), capture=django_capture_on_commit_callbacks)
    assert webhook_receiver.requests == []

    notification_channel_update(kind="webhook", enabled=False, target=webhook_receiver.url, events=["failed"],
                                actor=admin_user)
    other = make_task(tenant=running_task.tenant, status=lifecycle.RUNNING)
    _move(other, (lifecycle.RUNNING, lifecycle.FAILED), capture=django_capture_on_commit_callbacks)
    assert webhook_receiver.requests == []


def test_a_dead_webhook_is_logged_and_never_breaks_the_transition(admin_user, webhook_receiver, running_task, caplog,
                                                                  django_capture_on_commit_callbacks):
    url = webhook_receiver.url
    notification_channel_update(kind="webhook", enabled=True, target=url, events=["failed"], actor=admin_user)
    webhook_receiver.close()

    with caplog.at_level(logging.WARNING, logger="plugins_admin.notifications"):
        _move(running_task, (lifecycle.RUNNING, lifecycle.FAILED), capture=django_capture_on_commit_callbacks)

    running_task.refresh_from_db()
    assert running_task.status == lifecycle.FAILED
    assert "failed notification of task" in caplog.text and "could not reach" in caplog.text
    assert "/hook" not in caplog.text, "the webhook's path is masked in the log"


def test_an_error_status_from_the_webhook_is_logged(webhook_on, webhook_receiver, running_task, caplog,
                                                    django_capture_on_commit_callbacks):
    webhook_receiver.status = 500

    with caplog.at_level(logging.WARNING, logger="plugins_admin.notifications"):
        _move(running_task, (lifecycle.RUNNING, lifecycle.FAILED), capture=django_capture_on_commit_callbacks)

    assert len(webhook_receiver.requests) == 1
    assert "HTTP 500" in caplog.text and "/hook" not in caplog.text


def test_a_failed_task_is_mailed(email_on, running_task, django_capture_on_commit_callbacks):
    _move(running_task, (lifecycle.RUNNING, lifecycle.FAILED), reason="OOMKilled",
          capture=django_capture_on_commit_callbacks)

    [message] = mail.outbox
    assert message.to == ["ops@example.com", "oncall@example.com"]
    assert message.subject == "[HeteroFlow] task train-resnet failed"
    assert "OOMKilled" in message.body and "acme" in message.body


def test_the_mail_channel_skips_events_it_was_not_asked_for(email_on, running_task,
                                                            django_capture_on_commit_callbacks):
    _move(running_task, (lifecycle.RUNNING, lifecycle.SUCCEEDED), capture=django_capture_on_commit_callbacks)

    assert mail.outbox == []


def test_send_a_test_through_the_webhook(webhook_on, webhook_receiver):
    result = notification_channel_test(kind="webhook")

    assert result.ok is True
    assert result.detail.startswith("HTTP 204")
    assert webhook_receiver.requests[0]["json"]["event"] == "test"


def test_send_a_test_reports_a_failure(webhook_on, webhook_receiver):
    webhook_receiver.status = 404

    result = notification_channel_test(kind="webhook")

    assert result.ok is False
    assert "HTTP 404" in result.detail


def test_send_a_test_through_email(email_on):
    result = notification_channel_test(kind="email")

    assert result.ok is True
    assert mail.outbox[0].subject == "[HeteroFlow] task heteroflow-test test"


def test_send_a_test_needs_a_saved_target():
    with pytest.raises(DomainError) as refusal:
        notification_channel_test(kind="webhook")

    assert refusal.value.field == "target"


def _heartbeat(node, cards: int):
    from nodes.services import node_heartbeat_apply

    gpus = [{"index": index, "uuid": f"{node.name}-{index}", "type": "nvidia", "model": "A100",
             "memory_total_mb": 81920, "memory_used_mb": 0, "utilization": 0, "temperature": 30, "numa": None}
            for index in range(cards)]
    return node_heartbeat_apply(node=node, cpu_percent=1, memory_used_mb=1, gpus=gpus, labels={})


def test_a_node_reporting_more_than_a_card_more_or_fewer_is_audited_and_notified(
        admin_user, webhook_receiver, django_capture_on_commit_callbacks):
    """design §16.5: a node token claiming cards it lacks would attract other tenants' work."""
    from nodes.models import NodeAuditEntry

    notification_channel_update(kind="webhook", enabled=True, target=webhook_receiver.url,
                                events=["node-cards-changed"], actor=admin_user)
    node = make_node(cards=0, name="claims-cards")
    with django_capture_on_commit_callbacks(execute=True):
        _heartbeat(node, 2)  # the first report is the node's size, not a change
        _heartbeat(node, 3)  # one card: hardware does that
    assert webhook_receiver.requests == [] and not NodeAuditEntry.objects.exists()

    with django_capture_on_commit_callbacks(execute=True):
        _heartbeat(node, 64)

    entry = NodeAuditEntry.objects.get(node=node)
    assert (entry.action, entry.before, entry.after) == ("node.cards_changed", {"gpu_total": 3}, {"gpu_total": 64})
    [posted] = webhook_receiver.requests
    assert posted["json"]["event"] == "node-cards-changed"
    assert posted["json"]["node"] == {"id": node.id, "name": "claims-cards", "cards_before": 3, "cards_after": 64}


def test_a_quarantine_and_the_end_of_a_drain_are_notified(admin_user, webhook_receiver, settings,
                                                            django_capture_on_commit_callbacks):
    """design §17.3: through the notification plugins, webhook and e-mail."""
    from scheduling.hardware.drain import drain_nodes, node_drain

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    notification_channel_update(kind="webhook", enabled=True, target=webhook_receiver.url,
                                events=["card-quarantined", "node-drained"], actor=admin_user)
    notification_channel_update(kind="email", enabled=True, target="ops@example.com", events=["card-quarantined"],
                                actor=admin_user)
    node = make_node(cards=0, name="flaky")
    gpus = [{"index": 0, "uuid": "flaky-0", "type": "nvidia", "model": "A100", "memory_total_mb": 81920,
             "memory_used_mb": 0, "utilization": 0, "temperature": 30, "numa": None, "health": "failed",
             "errors": [{"code": "xid-79", "message": "GPU has fallen off the bus", "at": None}]}]
    from nodes.services import node_heartbeat_apply

    with django_capture_on_commit_callbacks(execute=True):
        node_heartbeat_apply(node=node, cpu_percent=1, memory_used_mb=1, gpus=gpus, labels={})
    [quarantined] = webhook_receiver.requests
    assert quarantined["json"]["event"] == "card-quarantined"
    assert quarantined["json"]["node"] == {"id": node.id, "name": "flaky", "card": "nvidia0",
                                           "reason": "xid-79: GPU has fallen off the bus"}
    [message] = mail.outbox
    assert "card-quarantined" in message.subject and "Card:   nvidia0" in message.body

    with django_capture_on_commit_callbacks(execute=True):
        node_drain(node=node, grace_seconds=None, actor=admin_user)
        drain_nodes()
    assert [request["json"]["event"] for request in webhook_receiver.requests] == ["card-quarantined", "node-drained"]
    assert webhook_receiver.requests[1]["json"]["node"] == {"id": node.id, "name": "flaky"}
