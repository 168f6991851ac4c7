"""Tokens without a browser (design §16.4): username and password for a token over the API, throttled and locked
out like the login page; the API tokens page; `manage.py issue_token`."""

import io
import re

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from knox.models import AuthToken
from rest_framework.settings import api_settings
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from tenants.models import ApiTokenName

URL = "/api/v1/auth/token"


def _with_token(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.mark.django_db
def test_username_and_password_give_a_working_token(tenant_client):
    response = APIClient().post(URL, {"username": "alice", "password": "tenant-password"}, format="json")
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"token", "expiry"} and body["token"].startswith("hfu_") and body["expiry"]
    assert _with_token(body["token"]).get("/api/v1/tasks").status_code == 200


@pytest.mark.django_db
def test_a_wrong_password_and_an_unknown_user_are_refused_alike_and_issue_nothing(tenant_client):
    before = AuthToken.objects.count()
    wrong = APIClient().post(URL, {"username": "alice", "password": "not-it"}, format="json")
    unknown = APIClient().post(URL, {"username": "nobody", "password": "not-it"}, format="json")
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.json() == unknown.json() == {"code": "invalid_credentials", "message": "invalid username or password"}
    assert AuthToken.objects.count() == before


@pytest.mark.django_db
def test_an_inactive_user_gets_no_token(tenant_client):
    get_user_model().objects.filter(username="alice").update(is_active=False)
    response = APIClient().post(URL, {"username": "alice", "password": "tenant-password"}, format="json")
    assert (response.status_code, response.json()["code"]) == (401, "invalid_credentials")


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "field"), [({"password": "x"}, "username"), ({"username": "alice"}, "password"),
                                             ({"username": "alice", "password": "x", "otp": 1}, "otp")])
def test_a_malformed_body_is_400_naming_the_field(body, field):
    response = APIClient().post(URL, body, format="json")
    assert (response.status_code, response.json()["field"]) == (400, field)


@pytest.mark.django_db
def test_failures_lock_the_username_out_here_and_on_the_login_page(tenant_client, settings):
    settings.AXES_FAILURE_LIMIT = 3
    attacker = APIClient()
    for _ in range(3):
        attacker.post(URL, {"username": "alice", "password": "guess"}, format="json")
    locked = attacker.post(URL, {"username": "alice", "password": "tenant-password"}, format="json")
    assert (locked.status_code, locked.json()["code"]) == (429, "locked_out")
    assert Client().post("/login/", {"username": "alice", "password": "tenant-password"}).status_code == 429
    elsewhere = APIClient(REMOTE_ADDR="198.51.100.7")
    assert elsewhere.post(URL, {"username": "alice", "password": "tenant-password"}, format="json").status_code == 201


@pytest.fixture
def low_auth_rate(settings):
    original = SimpleRateThrottle.THROTTLE_RATES
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK,
                               "DEFAULT_THROTTLE_RATES": {**original, "auth_token": "2/min"}}
    SimpleRateThrottle.THROTTLE_RATES = api_settings.DEFAULT_THROTTLE_RATES
    yield
    SimpleRateThrottle.THROTTLE_RATES = original


@pytest.mark.django_db
def test_requests_are_throttled_per_address(tenant_client, low_auth_rate):
    client = APIClient()
    answers = [client.post(URL, {"username": "alice", "password": "tenant-password"}, format="json")
               for _ in range(3)]
    assert [answer.status_code for answer in answers] == [201, 201, 429]
    assert answers[2].json()["code"] == "throttled"


@pytest.mark.django_db
def test_the_tokens_page_issues_once_lists_and_revokes(tenant_web, other_tenant_web):
    page = tenant_web.get("/tokens/")
    assert page.status_code == 200 and 'id="issue-token"' in page.content.decode()
    issued = tenant_web.post("/tokens/", {"action": "issue", "name": "laptop", "password": "tenant-password"})
    assert issued["Cache-Control"] == "no-store"
    token = issued.context["issued"]
    assert token in issued.content.decode()
    key = AuthToken.objects.filter(user=tenant_web.user).latest("created").token_key
    assert _with_token(token).get("/api/v1/tasks").status_code == 200
    listed = tenant_web.get("/tokens/").content.decode()
    assert f'id="token-{key}"' in listed and token not in listed, "a token is shown once only"

    refused = other_tenant_web.post("/tokens/", {"action": "revoke", "token_key": key}, follow=True)
    assert "You have no token" in refused.content.decode()
    assert _with_token(token).get("/api/v1/tasks").status_code == 200
    revoked = tenant_web.post("/tokens/", {"action": "revoke", "token_key": key})
    assert revoked.status_code == 302
    assert _with_token(token).get("/api/v1/tasks").status_code == 401


@pytest.mark.django_db
def test_the_tokens_page_asks_for_a_name_and_lists_each_token_by_it(tenant_web, settings):
    settings.AXES_FAILURE_LIMIT = 1
    before = AuthToken.objects.filter(user=tenant_web.user).count()

    for name, error in (("  ", "give the token a name"), ("x" * 65, "at most 64 printable characters")):
        refused = tenant_web.post("/tokens/", {"action": "issue", "name": name, "password": "not-it"})
        assert refused.status_code == 400
        assert re.search(rf'<div class="field-error" data-field="name">[^<]*{error}', refused.content.decode())
    assert AuthToken.objects.filter(user=tenant_web.user).count() == before
    # The name was refused before the password was tried: no failure counted toward the lockout.
    issued = tenant_web.post("/tokens/", {"action": "issue", "name": " laptop ", "password": "tenant-password"})

    assert issued.status_code == 200 and issued.context["issued"]
    token = AuthToken.objects.filter(user=tenant_web.user).latest("created")
    assert token.token_name.name == "laptop"
    row = re.search(rf'<tr id="token-{token.token_key}">(.*?)</tr>', tenant_web.get("/tokens/").content.decode(), re.S)
    assert '<td class="token-name">laptop</td>' in row.group(1)
    assert f'data-confirm="Revoke the token laptop ({token.token_key}…)?' in row.group(1)


@pytest.mark.django_db
def test_username_and_password_give_a_token_named_as_asked(tenant_client):
    named = APIClient().post(URL, {"username": "alice", "password": "tenant-password", "name": "ci runner"},
                             format="json")
    unnamed = APIClient().post(URL, {"username": "alice", "password": "tenant-password"}, format="json")

    assert named.status_code == unnamed.status_code == 201
    names = set(ApiTokenName.objects.filter(token__user=tenant_client.user).values_list("name", flat=True))
    assert {"ci runner", "signed in with a password"} <= names


@pytest.mark.django_db
def test_the_tokens_page_needs_a_login(client):
    response = client.get("/tokens/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


@pytest.mark.django_db
def test_issue_token_prints_a_working_token_and_refuses_unknown_users(tenant_client):
    out = io.StringIO()
    call_command("issue_token", "alice", "--name", "backup script", stdout=out, stderr=io.StringIO())
    assert _with_token(out.getvalue().strip()).get("/api/v1/tasks").status_code == 200
    assert ApiTokenName.objects.filter(token__user__username="alice", name="backup script").exists()
    with pytest.raises(CommandError, match="give the token a name"):
        call_command("issue_token", "alice", "--name", " ", stdout=io.StringIO())
    with pytest.raises(CommandError, match="no user 'nobody'"):
        call_command("issue_token", "nobody", stdout=io.StringIO())


@pytest.mark.django_db
def test_the_tokens_page_suggests_storing_a_token_from_stdin_never_on_the_command_line(tenant_web):
    page = tenant_web.post("/tokens/", {"action": "issue", "name": "laptop", "password": "tenant-password"}).content.decode()
    assert "id=\"issued-token-value\"" in page and "--token-stdin" in page
    assert "--token &lt;token&gt;" not in page and "--token <" not in page
