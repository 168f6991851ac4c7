"""A signed-in page reads its user with the membership and tenant in one statement (tenants.authentication.
SessionUserBackend); sessions logged in through Django's ModelBackend are moved to it by tenants' migration 0006."""

import importlib

import pytest
from django.apps import apps as installed_apps
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from tests.factories import make_task

sessions_migration = importlib.import_module("tenants.migrations.0006_sessions_use_membership_backend")


def _statements_reading(captured, table: str) -> list[str]:
    return [query["sql"] for query in captured.captured_queries if f'FROM "{table}"' in query["sql"]]


@pytest.mark.django_db
def test_a_tenant_users_page_reads_the_user_membership_and_tenant_in_one_statement(tenant_web, tenant):
    task = make_task(tenant=tenant, name="mine")
    with CaptureQueriesContext(connection) as captured:
        response = tenant_web.get(f"/tasks/{task.id}/")
    assert response.status_code == 200 and "mine" in response.content.decode()
    user_reads = _statements_reading(captured, "auth_user")
    assert len(user_reads) == 1
    assert '"tenants_tenantmembership"' in user_reads[0] and '"tenants_tenant"' in user_reads[0]
    assert _statements_reading(captured, "tenants_tenantmembership") == []


@pytest.mark.django_db
def test_an_admins_page_reads_no_membership_after_the_user(admin_web):
    with CaptureQueriesContext(connection) as captured:
        assert admin_web.get("/tasks/").status_code == 200
    assert len(_statements_reading(captured, "auth_user")) == 1
    assert _statements_reading(captured, "tenants_tenantmembership") == []


@pytest.mark.django_db
def test_a_deactivated_users_session_is_signed_out(tenant_web):
    tenant_web.user.is_active = False
    tenant_web.user.save(update_fields=["is_active"])
    response = tenant_web.get("/tasks/")
    assert response.status_code == 302 and response["Location"].startswith(settings.LOGIN_URL)


def _session_logged_in_by(user, backend: str) -> Client:
    client = Client()
    client.force_login(user, backend=backend)
    return client


@pytest.mark.django_db
def test_the_migration_keeps_signed_in_the_sessions_django_s_backend_logged_in(tenant_client):
    before_upgrade = _session_logged_in_by(tenant_client.user, sessions_migration.DJANGO_BACKEND)
    not_moved = _session_logged_in_by(tenant_client.user, sessions_migration.DJANGO_BACKEND)
    assert not_moved.get("/tasks/").status_code == 302  # a backend no longer listed signs its sessions out

    sessions_migration.forwards(installed_apps, None)

    assert before_upgrade.get("/tasks/").status_code == 200
    moved = SessionStore(session_key=before_upgrade.cookies[settings.SESSION_COOKIE_NAME].value).load()
    assert moved[BACKEND_SESSION_KEY] == sessions_migration.SESSION_USER_BACKEND
    assert moved[SESSION_KEY] == str(tenant_client.user.pk)


@pytest.mark.django_db
def test_reversing_the_migration_gives_the_sessions_back_to_django_s_backend(tenant_client):
    client = _session_logged_in_by(tenant_client.user, sessions_migration.SESSION_USER_BACKEND)
    sessions_migration.backwards(installed_apps, None)
    moved = SessionStore(session_key=client.cookies[settings.SESSION_COOKIE_NAME].value).load()
    assert moved[BACKEND_SESSION_KEY] == sessions_migration.DJANGO_BACKEND
