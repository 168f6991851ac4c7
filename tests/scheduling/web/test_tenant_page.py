"""The tenants page (staff): a tenant's cohort and dedicated nodes, and users deactivated and reactivated, each change
through its service, each refusal beside its field and nothing written."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from knox.models import AuthToken
from rest_framework.test import APIClient

from nodes.models import Node, NodeAuditEntry
from tenants.models import Cohort, TenancyAuditEntry, Tenant
from tenants.services import tenant_user_create
from tests.factories import make_node
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db


def _errors(page: str, field: str) -> list[str]:
    return re.findall(rf'<div class="field-error" data-field="{field}">(.*?)</div>', page)


def test_staff_move_a_tenant_into_a_cohort_and_out_again(admin_web, tenant):
    research = Cohort.objects.create(name="research")

    answer = admin_web.post("/tenants/", {"form": "cohort", "tenant": tenant.id, "cohort": research.id}, **HTMX)

    assert answer.status_code == 200 and "acme is in cohort research." in answer.content.decode()
    tenant.refresh_from_db()
    assert tenant.cohort == research
    assert TenancyAuditEntry.objects.get(action="tenant.cohort").details == {"before": None, "after": "research"}
    assert re.search(rf'<option value="{research.id}" selected>research</option>', answer.content.decode())

    admin_web.post("/tenants/", {"form": "cohort", "tenant": tenant.id, "cohort": ""}, **HTMX)
    tenant.refresh_from_db()
    assert tenant.cohort is None


@pytest.mark.parametrize("cohort", ["999999", "research"])
def test_a_cohort_that_does_not_exist_is_refused_beside_the_field(admin_web, tenant, cohort):
    answer = admin_web.post("/tenants/", {"form": "cohort", "tenant": tenant.id, "cohort": cohort}, **HTMX)

    assert answer.status_code == 400 and _errors(answer.content.decode(), "cohort")
    tenant.refresh_from_db()
    assert tenant.cohort is None and not TenancyAuditEntry.objects.filter(action="tenant.cohort").exists()


def test_staff_choose_a_tenants_dedicated_nodes_by_name(admin_web, tenant):
    first, second, kept_shared = make_node(name="gpu-a"), make_node(name="gpu-b"), make_node(name="gpu-c")

    answer = admin_web.post("/tenants/", {"form": "nodes", "tenant": tenant.id,
                                          "dedicated_nodes": "gpu-a, gpu-b"}, **HTMX)

    page = answer.content.decode()
    assert answer.status_code == 200 and "acme has 2 dedicated nodes." in page
    assert 'name="dedicated_nodes" value="gpu-a, gpu-b"' in page
    assert set(Node.objects.filter(dedicated_tenant=tenant).values_list("name", flat=True)) == {"gpu-a", "gpu-b"}
    assert NodeAuditEntry.objects.filter(action="node.update", actor=admin_web.user).count() == 2

    # Left out of the list: shared again.
    admin_web.post("/tenants/", {"form": "nodes", "tenant": tenant.id, "dedicated_nodes": "gpu-b"}, **HTMX)
    first.refresh_from_db(), second.refresh_from_db(), kept_shared.refresh_from_db()
    assert (first.dedicated_tenant_id, second.dedicated_tenant_id, kept_shared.dedicated_tenant_id) == (
        None, tenant.id, None)


def test_an_unknown_node_or_one_dedicated_to_another_tenant_is_refused_beside_the_field(admin_web, tenant,
                                                                                        other_tenant):
    make_node(name="gpu-a")
    make_node(name="gpu-theirs", dedicated_tenant=other_tenant)

    unknown = admin_web.post("/tenants/", {"form": "nodes", "tenant": tenant.id,
                                           "dedicated_nodes": "gpu-a gpu-zz"}, **HTMX)
    taken = admin_web.post("/tenants/", {"form": "nodes", "tenant": tenant.id,
                                         "dedicated_nodes": "gpu-a,gpu-theirs"}, **HTMX)

    assert unknown.status_code == 400 and _errors(unknown.content.decode(), "dedicated_nodes") == [
        "no node named gpu-zz"]
    # What was typed stays in the input, to be corrected.
    assert 'name="dedicated_nodes" value="gpu-a gpu-zz"' in unknown.content.decode()
    assert taken.status_code == 400
    assert "gpu-theirs is dedicated to globex" in _errors(taken.content.decode(), "dedicated_nodes")[0]
    assert not Node.objects.filter(dedicated_tenant=tenant).exists()
    assert Node.objects.get(name="gpu-theirs").dedicated_tenant == other_tenant


def test_staff_deactivate_and_reactivate_a_user(admin_web, tenant):
    bob, token = tenant_user_create(tenant=tenant, username="bob", password="bob-password-long")
    bobs_browser = Client()
    bobs_browser.force_login(bob)

    answer = admin_web.post("/tenants/", {"form": "active", "user": bob.id, "is_active": "false"}, **HTMX)

    assert answer.status_code == 200 and "bob is deactivated" in answer.content.decode()
    assert not get_user_model().objects.get(id=bob.id).is_active
    assert TenancyAuditEntry.objects.get(action="user.active").details == {"is_active": False}
    # Signed out of the console, their tokens revoked.
    assert bobs_browser.get("/").status_code == 302
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert api.get("/api/v1/tasks").status_code == 401 and not AuthToken.objects.filter(user=bob).exists()

    admin_web.post("/tenants/", {"form": "active", "user": bob.id, "is_active": "true"}, **HTMX)
    assert get_user_model().objects.get(id=bob.id).is_active
    assert Client().post("/login/", {"username": "bob", "password": "bob-password-long"}).status_code == 302


def test_an_admin_cannot_deactivate_themselves(admin_web):
    answer = admin_web.post("/tenants/", {"form": "active", "user": admin_web.user.id, "is_active": "false"}, **HTMX)

    assert answer.status_code == 400
    assert _errors(answer.content.decode(), "is_active") == [
        "you cannot deactivate yourself: ask another administrator"]
    assert get_user_model().objects.get(id=admin_web.user.id).is_active


def test_a_tenant_user_can_change_nothing_here(tenant_web, tenant):
    cohort = Cohort.objects.create(name="research")
    make_node(name="gpu-a")
    bob, _ = tenant_user_create(tenant=tenant, username="bob", password="bob-password-long")

    for form in ({"form": "cohort", "tenant": tenant.id, "cohort": cohort.id},
                 {"form": "nodes", "tenant": tenant.id, "dedicated_nodes": "gpu-a"},
                 {"form": "active", "user": bob.id, "is_active": "false"}):
        assert tenant_web.post("/tenants/", form, **HTMX).status_code == 403
    assert Tenant.objects.get(id=tenant.id).cohort is None
    assert Node.objects.get(name="gpu-a").dedicated_tenant is None
    assert get_user_model().objects.get(id=bob.id).is_active


def test_the_forms_need_their_csrf_token(admin_user, tenant):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(admin_user)
    cohort = Cohort.objects.create(name="research")
    make_node(name="gpu-a")
    page = browser.get("/tenants/").content.decode()
    assert page.count('name="csrfmiddlewaretoken"') >= 4

    assert browser.post("/tenants/", {"form": "cohort", "tenant": tenant.id, "cohort": cohort.id}).status_code == 403
    assert browser.post("/tenants/", {"form": "nodes", "tenant": tenant.id,
                                      "dedicated_nodes": "gpu-a"}).status_code == 403
    assert browser.post("/tenants/", {"form": "active", "user": admin_user.id, "is_active": "false"}).status_code == 403
    assert Tenant.objects.get(id=tenant.id).cohort is None and not Node.objects.filter(dedicated_tenant=tenant).exists()


def test_an_unknown_form_is_a_400(admin_web, tenant):
    assert admin_web.post("/tenants/", {"form": "nonsense", "tenant": tenant.id}).status_code == 400


def test_the_page_reads_the_same_number_of_rows_whatever_the_tenants_and_nodes(admin_web, tenant):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin_web.get("/tenants/").status_code == 200
        return len(captured)

    make_node(name="gpu-a", dedicated_tenant=tenant)
    few = queries()
    cohort = Cohort.objects.create(name="research")
    for number in range(5):
        other = Tenant.objects.create(name=f"tenant-{number}", cohort=cohort)
        make_node(name=f"gpu-{number}", dedicated_tenant=other)
        tenant_user_create(tenant=other, username=f"user-{number}", password="a-long-enough-password")

    assert queries() == few
