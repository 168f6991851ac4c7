import pytest

from heteroflow_site.errors import DomainError
from plugins_admin.models import NotificationChannel, PluginChange
from plugins_admin.notifications.services import notification_channel_update
from plugins_admin.services import UnknownPlugin

pytestmark = pytest.mark.django_db


def test_notification_channel_update_saves_and_records_history(admin_user, webhook_receiver):
    channel = notification_channel_update(kind="webhook", enabled=True, target=f"  {webhook_receiver.url} ",
                                          events=["succeeded", "failed"], actor=admin_user)

    channel.refresh_from_db()
    assert (channel.enabled, channel.target, channel.events) == (True, webhook_receiver.url, ["failed", "succeeded"])
    change = PluginChange.objects.get()
    assert change.plugin == "notification:webhook"
    assert change.actor == admin_user
    assert change.before == {"enabled": False, "target": "", "events": ["failed", "preempted", "succeeded"]}
    # The history shows the webhook's host only: its path is often the secret (design §16.5).
    masked = webhook_receiver.url.removesuffix("/hook") + "/…"
    assert change.after == {"enabled": True, "target": masked, "events": ["failed", "succeeded"]}
    assert "/hook" not in str(change.after)


def test_a_webhook_path_change_is_saved_and_recorded_though_the_history_masks_both(admin_user):
    notification_channel_update(kind="webhook", enabled=True, target="https://hooks.example.com/T0/B1/secret-1",
                                events=["failed"], actor=admin_user)
    notification_channel_update(kind="webhook", enabled=True, target="https://hooks.example.com/T0/B1/secret-2",
                                events=["failed"], actor=admin_user)
    assert NotificationChannel.objects.get(kind="webhook").target.endswith("secret-2")
    assert PluginChange.objects.count() == 2
    assert "secret" not in str(list(PluginChange.objects.values_list("before", "after")))


@pytest.mark.parametrize("kind, target, events, field", [
    ("webhook", "not a url", ["failed"], "target"),
    ("webhook", "ftp://example.com/hook", ["failed"], "target"),
    ("webhook", "", ["failed"], "target"),
    ("email", "ops@example.com, nobody", ["failed"], "target"),
    ("email", "ops@example.com", ["exploded"], "events"),
    ("email", "ops@example.com", [], "events"),
])
def test_notification_channel_update_validates_with_field_errors(admin_user, kind, target, events, field):
    with pytest.raises(DomainError) as refusal:
        notification_channel_update(kind=kind, enabled=True, target=target, events=events, actor=admin_user)

    assert refusal.value.field == field
    channel = NotificationChannel.objects.get(kind=kind)
    assert (channel.enabled, channel.target) == (False, "")
    assert not PluginChange.objects.exists()


def test_email_addresses_are_normalised(admin_user):
    channel = notification_channel_update(kind="email", enabled=True, target="a@example.com,  b@example.com ,",
                                          events=["failed"], actor=admin_user)

    assert channel.target == "a@example.com, b@example.com"


def test_unknown_notification_channel_is_refused(admin_user):
    with pytest.raises(UnknownPlugin):
        notification_channel_update(kind="pager", enabled=False, target="", events=[], actor=admin_user)
