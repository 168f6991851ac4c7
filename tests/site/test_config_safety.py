"""Configuration safety (issue 13 item 5): the settings refuse what would be unsafe in production."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from heteroflow_site.errors import DomainError
from tenants.services import tenant_user_create


def _settings_in_a_fresh_process(data_dir, **env) -> subprocess.CompletedProcess:
    """Import the settings as a new process would, with `env` on top of the test environment and `data_dir` as
    the data folder (where a local run keeps its secret key)."""
    code = ("import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'heteroflow_site.settings'; django.setup(); "
            "from django.conf import settings as s; print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, "
            "s.SECURE_HSTS_SECONDS, s.SECURE_PROXY_SSL_HEADER)")
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("SECRET_KEY", "DEBUG", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE")}
    return subprocess.run([sys.executable, "-c", code], env={**environment, "HETEROFLOW_DATA_DIR": str(data_dir), **env},
                          capture_output=True, text=True, timeout=120)


REAL_KEY = "a-real-secret-" + "x" * 37


def test_the_development_secret_key_is_refused_without_debug(tmp_path):
    refused = _settings_in_a_fresh_process(tmp_path)
    assert refused.returncode != 0 and "set SECRET_KEY" in refused.stderr
    assert _settings_in_a_fresh_process(tmp_path, DEBUG="true").returncode == 0


def test_without_secret_key_a_local_run_uses_the_key_make_run_keeps_in_the_data_folder(tmp_path):
    kept, exported = "kept-by-make-run-" + "k" * 40, "exported-" + "e" * 50
    (tmp_path / "secret_key").write_text(f"{kept}\n")
    code = ("import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'heteroflow_site.settings'; django.setup(); "
            "from django.conf import settings; print(settings.SECRET_KEY)")
    environment = {key: value for key, value in os.environ.items() if key != "SECRET_KEY"}
    local = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**environment, "HETEROFLOW_DATA_DIR": str(tmp_path)})
    assert local.stdout.strip() == kept, local.stderr
    # A key in the environment wins over the file.
    chosen = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**environment, "HETEROFLOW_DATA_DIR": str(tmp_path), "SECRET_KEY": exported})
    assert chosen.stdout.strip() == exported, chosen.stderr


def test_a_secret_key_shorter_than_50_characters_is_refused_without_debug(tmp_path):
    """design §16.5."""
    refused = _settings_in_a_fresh_process(tmp_path, SECRET_KEY=REAL_KEY[:49])
    assert refused.returncode != 0 and "SECRET_KEY has 49 characters; at least 50" in refused.stderr
    assert _settings_in_a_fresh_process(tmp_path, SECRET_KEY=REAL_KEY).returncode == 0
    assert _settings_in_a_fresh_process(tmp_path, SECRET_KEY="short", DEBUG="true").returncode == 0


def test_a_join_token_shorter_than_32_characters_is_refused_at_start(tmp_path):
    """design §16.5."""
    refused = _settings_in_a_fresh_process(tmp_path, SECRET_KEY=REAL_KEY, HETEROFLOW_JOIN_TOKEN="j" * 31)
    assert refused.returncode != 0 and "HETEROFLOW_JOIN_TOKEN has 31 characters" in refused.stderr
    assert _settings_in_a_fresh_process(tmp_path, SECRET_KEY=REAL_KEY, HETEROFLOW_JOIN_TOKEN="j" * 32).returncode == 0


def test_production_defaults_are_secure_cookies_and_the_rest_comes_from_the_environment(tmp_path):
    default = _settings_in_a_fresh_process(tmp_path, SECRET_KEY=REAL_KEY)
    assert default.stdout.split() == ["True", "True", "0", "None"]
    tuned = _settings_in_a_fresh_process(tmp_path, SECRET_KEY=REAL_KEY, SECURE_HSTS_SECONDS="31536000",
                                         SECURE_PROXY_SSL_HEADER="HTTP_X_FORWARDED_PROTO,https")
    assert tuned.stdout.split() == ["True", "True", "31536000", "('HTTP_X_FORWARDED_PROTO',", "'https')"]


@pytest.mark.django_db
@pytest.mark.parametrize("password", ["password", "12345678901", "acme-user-1"])
def test_tenant_users_get_every_password_validator(tenant, password):
    with pytest.raises(DomainError) as refused:
        tenant_user_create(tenant=tenant, username="acme-user-1", password=password)
    assert refused.value.field == "password"
    assert not get_user_model().objects.filter(username="acme-user-1").exists()


@pytest.mark.django_db
def test_weak_password_through_the_api_is_refused_naming_password_and_creates_nothing(admin_client, tenant):
    """A password the schema allows but a validator refuses is a documented not_allowed refusal (403, issue 31:
    a schema-valid request is not answered 400), naming the field."""
    response = admin_client.post(f"/api/v1/tenants/{tenant.id}/users", {"username": "x1", "password": "password"},
                                 format="json")
    assert response.status_code == 403, response.content
    assert response.json()["code"] == "not_allowed" and response.json()["field"] == "password"
    assert not get_user_model().objects.filter(username="x1").exists()


@pytest.mark.django_db
def test_seed_demo_refuses_to_run_with_debug_off_unless_forced(settings):
    """design §16.5: published logins and fake online nodes only when asked for."""
    settings.DEBUG = False
    with pytest.raises(CommandError, match="DEBUG is off"):
        call_command("seed_demo")
    assert not get_user_model().objects.filter(username="admin").exists()
    settings.DEBUG = True
    call_command("seed_demo")
    assert get_user_model().objects.filter(username="admin").exists()


@pytest.mark.django_db
def test_seed_demo_refuses_a_database_with_real_users_unless_forced(settings):
    settings.DEBUG = True
    get_user_model().objects.create_user(username="real-operator", password="x")
    with pytest.raises(CommandError, match="not demo users"):
        call_command("seed_demo")
    assert not get_user_model().objects.filter(username="alice").exists()
    call_command("seed_demo", force=True)
    assert get_user_model().objects.filter(username="alice").exists()


def test_the_local_secret_key_is_readable_by_its_owner_only(tmp_path):
    """It was written 0644 by a shell redirection: every user of the machine could read it."""
    import stat

    from heteroflow_site.configuration import keep_local_secret_key

    old_umask = os.umask(0o022)
    try:
        path = keep_local_secret_key(tmp_path / "data")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = path.read_text()
    assert len(key.strip()) >= 50
    assert keep_local_secret_key(tmp_path / "data").read_text() == key, "kept, not replaced"

    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "secret_key").write_text("kept-by-an-earlier-make-run-" + "k" * 30 + "\n")
    (earlier / "secret_key").chmod(0o644)
    assert stat.S_IMODE(keep_local_secret_key(earlier).stat().st_mode) == 0o600


def test_make_run_keeps_its_key_through_that_function():
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert "keep_local_secret_key('.data')" in makefile and "> .data/secret_key" not in makefile


def test_allowed_hosts_by_default_are_the_local_ones_only(tmp_path, settings):
    """`testserver` (Django's test client's host) was allowed by default in every deployment."""
    code = ("import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'heteroflow_site.settings'; django.setup(); "
            "from django.conf import settings as s; print(','.join(s.ALLOWED_HOSTS))")
    environment = {key: value for key, value in os.environ.items() if key != "ALLOWED_HOSTS"}
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**environment, "HETEROFLOW_DATA_DIR": str(tmp_path)})
    assert fresh.stdout.strip() == "127.0.0.1,localhost", fresh.stderr
    # The tests' own client is let in by the test environment.
    assert "testserver" in settings.ALLOWED_HOSTS
