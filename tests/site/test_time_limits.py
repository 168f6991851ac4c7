"""Time limits (issue 13 item 7): PostgreSQL statement and lock timeouts, Celery limits and tick expiry."""

import pytest
from django.conf import settings
from django.db import connection, transaction
from django.db.utils import OperationalError


@pytest.mark.django_db
def test_every_connection_carries_the_statement_and_lock_timeouts():
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        statement = cursor.fetchone()[0]
        cursor.execute("SHOW lock_timeout")
        lock = cursor.fetchone()[0]
    assert (statement, lock) == (f"{settings.DATABASE_STATEMENT_TIMEOUT_MS}ms".replace("000ms", "s"),
                                 f"{settings.DATABASE_LOCK_TIMEOUT_MS}ms".replace("000ms", "s"))


@pytest.mark.django_db
def test_connections_do_not_jit_compile_statements():
    with connection.cursor() as cursor:
        cursor.execute("SHOW jit")
        assert cursor.fetchone()[0] == "off"


@pytest.mark.django_db
def test_a_runaway_statement_is_cancelled():
    with pytest.raises(OperationalError, match="statement timeout"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL statement_timeout = 50")
            cursor.execute("SELECT pg_sleep(5)")


def test_celery_ticks_expire_and_tasks_have_time_limits():
    assert all(entry["options"]["expires"] == entry["schedule"] for entry in settings.CELERY_BEAT_SCHEDULE.values())
    assert 0 < settings.CELERY_TASK_SOFT_TIME_LIMIT < settings.CELERY_TASK_TIME_LIMIT
