"""User API tokens (issue 13 item 3): stored hashed, several per user, revocable by their owner and by admins."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from tenants.models import TenancyAuditEntry


def _client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.mark.django_db
def test_only_a_digest_of_a_token_is_stored(admin_client, tenant):
    response = admin_client.post(f"/api/v1/tenants/{tenant.id}/users", {"username": "dora", "password": "Quartz-77-Lamp"},
                                 format="json")
    token = response.json()["token"]
    assert token.startswith("hfu_") and _client(token).get("/api/v1/tasks").status_code == 200
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {AuthToken._meta.db_table}")
        stored = " ".join(str(value) for row in cursor.fetchall() for value in row)
    assert token not in stored


@pytest.mark.django_db
def test_a_user_issues_lists_and_revokes_its_own_tokens(tenant_client, other_tenant_client):
    issued = tenant_client.post("/api/v1/tokens")
    assert issued.status_code == 201
    second = issued.json()
    listed = tenant_client.get("/api/v1/tokens").json()
    assert {row["token_key"] for row in listed} >= {second["token_key"]} and len(listed) == 2
    assert other_tenant_client.delete(f"/api/v1/tokens/{second['token_key']}").status_code == 404, "not theirs"
    assert tenant_client.delete(f"/api/v1/tokens/{second['token_key']}").status_code == 204
    assert _client(second["token"]).get("/api/v1/tasks").status_code == 401
    assert tenant_client.get("/api/v1/tasks").status_code == 200, "the other token still works"
    assert TenancyAuditEntry.objects.filter(action="token.revoke").exists()


@pytest.mark.django_db
def test_an_admin_revokes_every_token_of_a_user(admin_client, tenant_client):
    user_id = tenant_client.user.id
    tenant_client.post("/api/v1/tokens")
    response = admin_client.post(f"/api/v1/users/{user_id}/tokens/revoke")
    assert response.status_code == 200 and response.json() == {"revoked": 2}
    assert tenant_client.get("/api/v1/tasks").status_code == 401
    assert tenant_client.post(f"/api/v1/users/{user_id}/tokens/revoke").status_code == 401


@pytest.mark.django_db
def test_a_tenant_cannot_revoke_other_users_tokens(tenant_client, other_tenant_client):
    response = tenant_client.post(f"/api/v1/users/{other_tenant_client.user.id}/tokens/revoke")
    assert response.status_code == 403
    assert other_tenant_client.get("/api/v1/tasks").status_code == 200


@pytest.mark.django_db
def test_tokens_can_be_revoked_in_the_django_admin(admin_user, tenant_client):
    from django.test import Client

    web = Client()
    web.force_login(admin_user)
    digest = AuthToken.objects.get(user=tenant_client.user).digest
    page = web.get("/admin/knox/authtoken/")
    assert page.status_code == 200
    response = web.post("/admin/knox/authtoken/", {"action": "delete_selected", "_selected_action": [digest],
                                                   "post": "yes"})
    assert response.status_code == 302
    assert tenant_client.get("/api/v1/tasks").status_code == 401


@pytest.mark.django_db
def test_a_user_holds_at_most_the_token_limit_and_the_refusal_changes_nothing(tenant_client, settings):
    """issue 27 item 10: a per-user token limit (HETEROFLOW_TOKENS_PER_USER)."""
    from knox.models import AuthToken

    settings.HETEROFLOW_TOKENS_PER_USER = 3  # the fixture's user holds one already
    assert [tenant_client.post("/api/v1/tokens").status_code for _ in range(2)] == [201, 201]
    refused = tenant_client.post("/api/v1/tokens")
    assert refused.status_code == 409 and refused.json()["code"] == "too_many_tokens"
    assert AuthToken.objects.filter(user=tenant_client.user).count() == 3
    key = AuthToken.objects.filter(user=tenant_client.user).order_by("created").last().token_key
    assert tenant_client.delete(f"/api/v1/tokens/{key}").status_code == 204
    assert tenant_client.post("/api/v1/tokens").status_code == 201


@pytest.mark.django_db
def test_the_old_plaintext_token_table_is_dropped_by_a_migration():
    """issue 27 item 10: a database that carried DRF's authtoken still held usable plaintext tokens."""
    import importlib

    drop = importlib.import_module("tenants.migrations.0003_drop_plaintext_authtoken").DROP_PLAINTEXT_TOKENS
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, user_id integer)")
        cursor.execute(drop)
        cursor.execute("SELECT to_regclass('authtoken_token')")
        assert cursor.fetchone() == (None,)


@pytest.mark.django_db
def test_a_token_request_reads_the_token_user_and_tenant_in_one_statement(tenant_client, tenant):
    with CaptureQueriesContext(connection) as queries:
        response = tenant_client.get("/api/v1/tokens")

    assert response.status_code == 200
    assert sum("knox_authtoken" in query["sql"] for query in queries.captured_queries) == 2, "auth, then the list"
    assert not any(query["sql"].lstrip().startswith('SELECT "tenants_') for query in queries.captured_queries)


@pytest.mark.django_db
def test_an_expired_token_is_refused_and_deleted_and_issuing_sweeps_the_others(tenant_client):
    user = tenant_client.user
    expired, expired_token = AuthToken.objects.create(user=user)
    other, _ = AuthToken.objects.create(user=user)
    AuthToken.objects.filter(digest__in=[expired.digest, other.digest]).update(
        expiry=timezone.now() - timedelta(seconds=1))

    assert _client(expired_token).get("/api/v1/tasks").status_code == 401
    assert not AuthToken.objects.filter(digest=expired.digest).exists()
    assert tenant_client.post("/api/v1/tokens").status_code == 201
    assert not AuthToken.objects.filter(digest=other.digest).exists()


@pytest.mark.django_db
def test_tokens_carry_the_name_they_were_issued_with(tenant_client):
    issued = tenant_client.post("/api/v1/tokens", {"name": "nightly job"}, format="json")
    unnamed = tenant_client.post("/api/v1/tokens")

    assert issued.status_code == unnamed.status_code == 201
    assert issued.json()["name"] == "nightly job" and unnamed.json()["name"] == "issued with another token"
    listed = {row["token_key"]: row["name"] for row in tenant_client.get("/api/v1/tokens").json()}
    assert listed[issued.json()["token_key"]] == "nightly job"
    # The fixture's token came with the account.
    assert "issued with the account" in listed.values()
    assert TenancyAuditEntry.objects.filter(action="token.issue", details__name="nightly job").exists()


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["", "   ", "lap\ttop", "x" * 65])
def test_a_blank_or_overlong_token_name_is_a_400_naming_the_field(tenant_client, name):
    before = AuthToken.objects.count()

    refused = tenant_client.post("/api/v1/tokens", {"name": name}, format="json")

    assert (refused.status_code, refused.json()["field"]) == (400, "name")
    assert AuthToken.objects.count() == before


@pytest.mark.django_db
def test_a_token_issued_before_names_is_listed_unnamed(tenant_client, tenant_web):
    AuthToken.objects.create(user=tenant_client.user)

    assert None in [row["name"] for row in tenant_client.get("/api/v1/tokens").json()]
    assert '<span class="muted" title="issued before tokens had names">unnamed</span>' in tenant_web.get(
        "/tokens/").content.decode()
