"""Who the client is behind proxies, and failed authentications throttled per address (design §16.5)."""

import pytest
from django.test import Client, RequestFactory
from rest_framework.test import APIClient

from heteroflow_site.client_ip import client_ip
from tests.site.test_abuse_limits import low_rates  # noqa: F401 (fixture)

PROXY = "10.0.0.2"


def _address(settings, *, remote=PROXY, forwarded=None, num_proxies=0, trusted=()):
    settings.NUM_PROXIES, settings.TRUSTED_PROXIES = num_proxies, list(trusted)
    extra = {"REMOTE_ADDR": remote}
    if forwarded is not None:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return client_ip(RequestFactory().get("/", **extra))


def test_without_proxy_settings_a_client_written_forwarded_for_is_ignored(settings):
    assert _address(settings, remote="203.0.113.9", forwarded="1.2.3.4") == "203.0.113.9"


def test_num_proxies_takes_the_address_the_outermost_proxy_saw(settings):
    assert _address(settings, forwarded="6.6.6.6, 198.51.100.4", num_proxies=1) == "198.51.100.4"
    assert _address(settings, forwarded="6.6.6.6, 198.51.100.4, 10.0.0.9", num_proxies=2) == "198.51.100.4"
    assert _address(settings, forwarded="198.51.100.4", num_proxies=3) == "198.51.100.4"


def test_num_proxies_believes_forwarded_for_only_from_a_private_or_loopback_peer(settings):
    """A client reaching the site directly (past the proxy) has a public address: what it writes is not believed."""
    # (The documentation ranges, 203.0.113.0/24 and the like, count as private.)
    assert _address(settings, remote="93.184.216.34", forwarded="6.6.6.6", num_proxies=1) == "93.184.216.34"
    assert _address(settings, remote="2606:2800:220:1::1", forwarded="6.6.6.6", num_proxies=1) == \
        "2606:2800:220:1::1"
    assert _address(settings, remote="", forwarded="6.6.6.6", num_proxies=1) == ""
    for proxy in ("127.0.0.1", "::1", "172.18.0.1", "192.168.1.10", "fd00::2"):
        assert _address(settings, remote=proxy, forwarded="6.6.6.6, 198.51.100.4", num_proxies=1) == \
            "198.51.100.4", proxy


@pytest.mark.django_db
def test_a_direct_client_cannot_dodge_the_lockout_with_forwarded_for_under_num_proxies(tenant_client, settings):
    settings.AXES_FAILURE_LIMIT, settings.NUM_PROXIES = 3, 1
    for n in range(3):
        Client(REMOTE_ADDR="93.184.216.34", HTTP_X_FORWARDED_FOR=f"198.51.100.{n}").post(
            "/login/", {"username": "alice", "password": "wrong"})
    right = Client(REMOTE_ADDR="93.184.216.34", HTTP_X_FORWARDED_FOR="198.51.100.200").post(
        "/login/", {"username": "alice", "password": "tenant-password"})
    assert right.status_code == 429


def test_trusted_proxies_take_the_rightmost_untrusted_address_from_a_trusted_peer_only(settings):
    trusted = ("10.0.0.0/8",)
    assert _address(settings, forwarded="6.6.6.6, 198.51.100.4, 10.0.0.9", trusted=trusted) == "198.51.100.4"
    assert _address(settings, remote="203.0.113.9", forwarded="1.2.3.4", trusted=trusted) == "203.0.113.9"
    assert _address(settings, forwarded="not-an-address", trusted=trusted) == "not-an-address"


@pytest.mark.django_db
def test_a_forged_forwarded_for_buys_no_fresh_anonymous_budget(low_rates):  # noqa: F811
    answers = [Client(HTTP_X_FORWARDED_FOR=f"192.0.2.{n}").get("/api/schema/").status_code for n in range(3)]
    assert answers == [200, 200, 429]


@pytest.mark.django_db
def test_behind_a_proxy_one_clients_bad_passwords_do_not_lock_out_another(tenant_client, settings):
    settings.AXES_FAILURE_LIMIT, settings.NUM_PROXIES = 3, 1
    attacker = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.66")
    for _ in range(3):
        attacker.post("/login/", {"username": "alice", "password": "wrong"})
    assert attacker.post("/login/", {"username": "alice", "password": "tenant-password"}).status_code == 429
    colleague = Client(REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR="198.51.100.7")
    assert colleague.post("/login/", {"username": "alice", "password": "tenant-password"}).status_code == 302


@pytest.mark.django_db
def test_failed_authentications_are_throttled_per_address(settings, tenant_client):
    settings.HETEROFLOW_AUTH_FAILURES_PER_MINUTE = 3
    guesser = APIClient(REMOTE_ADDR="198.51.100.66")
    guesser.credentials(HTTP_AUTHORIZATION="Token wrong-guess")
    assert [guesser.get("/api/v1/tasks").status_code for _ in range(4)] == [401, 401, 401, 429]
    # Right credentials from that address wait too; another address is not affected.
    token = tenant_client.token
    guesser.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert guesser.get("/api/v1/tasks").status_code == 429
    elsewhere = APIClient(REMOTE_ADDR="198.51.100.7")
    elsewhere.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert elsewhere.get("/api/v1/tasks").status_code == 200
