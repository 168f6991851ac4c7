"""A user's API tokens end with the credentials they were issued under; minting one on the page asks for the
password again; the page survives the token limit; revoking is throttled and only real revocations are audited."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from knox.models import AuthToken
from rest_framework.settings import api_settings
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from tenants.credential_changes import DEACTIVATED, PASSWORD_CHANGED
from tenants.models import TenancyAuditEntry

pytestmark = pytest.mark.django_db


def _with_token(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def _revocation_reasons(username: str) -> list[str]:
    return [entry.details.get("reason") for entry in
            TenancyAuditEntry.objects.filter(action="token.revoke", target=username).order_by("id")]


def test_a_password_change_revokes_every_token_of_the_user(tenant_client, other_tenant_client):
    second = tenant_client.post("/api/v1/tokens").json()["token"]
    user = tenant_client.user

    user.set_password("a-new-Password-42")
    user.save()

    assert tenant_client.get("/api/v1/tasks").status_code == 401
    assert _with_token(second).get("/api/v1/tasks").status_code == 401
    assert not AuthToken.objects.filter(user=user).exists()
    assert other_tenant_client.get("/api/v1/tasks").status_code == 200, "another user's tokens stay"
    assert _revocation_reasons(user.username) == [PASSWORD_CHANGED]


def test_an_admin_setting_a_users_password_revokes_its_tokens(admin_web, tenant_client):
    response = admin_web.post(f"/admin/auth/user/{tenant_client.user.id}/password/",
                              {"password1": "Another-Pass-9731", "password2": "Another-Pass-9731"})
    assert response.status_code == 302
    assert tenant_client.get("/api/v1/tasks").status_code == 401


def test_deactivating_a_user_revokes_its_tokens(tenant_client):
    user = tenant_client.user
    user.is_active = False
    user.save(update_fields=["is_active"])

    assert not AuthToken.objects.filter(user=user).exists()
    assert _revocation_reasons(user.username) == [DEACTIVATED]
    user.is_active = True
    user.save()
    assert _with_token(tenant_client.token).get("/api/v1/tasks").status_code == 401, "reactivating revives nothing"


def test_logging_in_and_other_saves_revoke_nothing(tenant_client, settings):
    user = tenant_client.user
    user.first_name = "Alice"
    user.save()
    # A login under a newer hasher saves the same password hashed anew: not a change of password.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2SHA1PasswordHasher",
                                 "django.contrib.auth.hashers.MD5PasswordHasher"]
    stored = get_user_model().objects.get(id=user.id).password
    assert Client().post("/login/", {"username": "alice", "password": "tenant-password"}).status_code == 302
    assert get_user_model().objects.get(id=user.id).password != stored, "the login re-hashed the password"
    assert tenant_client.get("/api/v1/tasks").status_code == 200
    assert _revocation_reasons(user.username) == []


def test_the_page_mints_a_token_only_with_the_password(tenant_web):
    before = AuthToken.objects.filter(user=tenant_web.user).count()
    missing = tenant_web.post("/tokens/", {"action": "issue", "name": "laptop"})
    wrong = tenant_web.post("/tokens/", {"action": "issue", "name": "laptop", "password": "not-it"})
    assert missing.status_code == wrong.status_code == 400
    assert 'data-field="password"' in missing.content.decode() and "not your password" in wrong.content.decode()
    assert AuthToken.objects.filter(user=tenant_web.user).count() == before
    assert missing.context["issued"] is None and wrong.context["issued"] is None

    right = tenant_web.post("/tokens/", {"action": "issue", "name": "laptop", "password": "tenant-password"})
    assert right.status_code == 200 and right.context["issued"]
    assert AuthToken.objects.filter(user=tenant_web.user).count() == before + 1


def test_wrong_passwords_on_the_page_count_toward_the_lockout(tenant_web, settings):
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        tenant_web.post("/tokens/", {"action": "issue", "name": "laptop", "password": "not-it"})
    locked = tenant_web.post("/tokens/", {"action": "issue", "name": "laptop", "password": "tenant-password"})
    assert locked.status_code == 429
    assert AuthToken.objects.filter(user=tenant_web.user).count() == 1


def test_a_signed_in_browser_cannot_mint_through_the_api_without_the_password(tenant_web):
    tenant_web.get("/tokens/")
    response = tenant_web.post("/api/v1/tokens")
    assert response.status_code == 403
    assert AuthToken.objects.filter(user=tenant_web.user).count() == 1


def test_at_the_token_limit_the_page_says_so_instead_of_failing(tenant_web, settings):
    settings.HETEROFLOW_TOKENS_PER_USER = 1  # the fixture's user holds one already
    response = tenant_web.post("/tokens/", {"action": "issue", "name": "laptop", "password": "tenant-password"})
    assert response.status_code == 409
    assert 'data-field="issue"' in response.content.decode() and "revoke one first" in response.content.decode()
    assert AuthToken.objects.filter(user=tenant_web.user).count() == 1


def test_revoking_an_unknown_token_writes_no_audit_row(tenant_client, tenant_web):
    for n in range(5):
        assert tenant_client.delete(f"/api/v1/tokens/bogus{n:03d}").status_code == 404
        tenant_web.post("/tokens/", {"action": "revoke", "token_key": f"bogus{n:03d}"})
    assert not TenancyAuditEntry.objects.filter(action="token.revoke").exists()


@pytest.fixture
def low_revoke_rate(settings):
    original = SimpleRateThrottle.THROTTLE_RATES
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {**original, "token_revoke": "3/min"}}
    SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    yield
    SimpleRateThrottle.THROTTLE_RATES = original


def test_revoking_is_throttled_per_user_on_the_api_and_the_page_alike(tenant_client, tenant_web, low_revoke_rate):
    answers = [tenant_client.delete(f"/api/v1/tokens/bogus{n:03d}").status_code for n in range(2)]
    page = tenant_web.post("/tokens/", {"action": "revoke", "token_key": "bogus-page"}, follow=True)
    assert answers == [404, 404] and "You have no token" in page.content.decode()
    assert tenant_client.delete("/api/v1/tokens/bogus-last").status_code == 429
    refused = tenant_web.post("/tokens/", {"action": "revoke", "token_key": tenant_client.token[:15]}, follow=True)
    assert "Too many revocations" in refused.content.decode()
    assert tenant_client.get("/api/v1/tasks").status_code == 200, "nothing was revoked past the budget"
