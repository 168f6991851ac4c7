from datetime import timedelta

from django.utils import timezone

from nodes.tasks import mark_silent_nodes_offline
from tests.factories import make_node


def test_liveness_ticker_marks_silent_nodes_offline(db):
    silent = make_node(last_heartbeat_at=timezone.now() - timedelta(seconds=60))
    assert mark_silent_nodes_offline() == 1
    silent.refresh_from_db()
    assert silent.status == "offline"
