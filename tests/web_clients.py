"""Signed-in browser clients for the page tests (a pytest plugin loaded by tests/conftest.py)."""

import pytest
from django.test import Client


def _signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    client.user = user
    return client


@pytest.fixture
def admin_web(admin_user):
    return _signed_in(admin_user)


@pytest.fixture
def tenant_web(tenant_client):
    return _signed_in(tenant_client.user)


@pytest.fixture
def other_tenant_web(other_tenant_client):
    return _signed_in(other_tenant_client.user)


HTMX = {"HTTP_HX_REQUEST": "true"}
