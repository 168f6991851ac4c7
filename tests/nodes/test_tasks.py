from datetime import timedelta

from django.utils import timezone

from heteroflow_site.celery import run_periodic_job
from tests.factories import make_node


def test_liveness_ticker_marks_silent_nodes_offline(db):
    silent = make_node(last_heartbeat_at=timezone.now() - timedelta(seconds=60))
    assert run_periodic_job("liveness") == "1 silent node(s) marked offline"
    silent.refresh_from_db()
    assert silent.status == "offline"
