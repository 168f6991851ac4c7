"""Sharing in the pages (design §16.2): the tenant's overview, the staff's sharing page (quotas and cohorts edited
with htmx) and borrowed work on the diagnostics page."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from scheduling import lifecycle
from scheduling.models import UsageRecord
from tenants.models import Cohort, TenancyAuditEntry, Tenant, TenantGpuQuota
from tests.factories import make_node, make_task
from tests.web_clients import HTMX

pytestmark = pytest.mark.django_db


def _running(tenant, node, gpus, *, borrowed=False):
    return make_task(tenant=tenant, gpu_type="nvidia", gpu_required=len(gpus), status=lifecycle.RUNNING, node=node,
                     gpus=gpus, card_type="nvidia", borrowed=borrowed, preemptible=True)


def _figures(page: str, gpu_type: str) -> tuple[str, str, str]:
    row = re.search(rf'<tr data-gpu-type="{gpu_type}">(.*?)</tr>', page, re.S).group(1)
    return tuple(re.search(rf'class="num {name}">(.*?)</td>', row, re.S).group(1).strip()
                 for name in ("used", "nominal", "borrowed"))


def test_a_tenants_overview_shows_used_nominal_and_borrowed_per_type_and_its_cohort(tenant_web, tenant):
    tenant.cohort = Cohort.objects.create(name="research")
    tenant.save()
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=2)
    node = make_node(cards=8)
    _running(tenant, node, [0, 1])
    _running(tenant, node, [2], borrowed=True)

    page = tenant_web.get("/").content.decode()

    assert 'id="your-share"' in page and '<strong class="cohort-name">research</strong>' in page
    assert _figures(page, "nvidia") == ("3", "2", "1")


def test_a_tenants_overview_lists_every_gpu_type_of_the_cluster(tenant_web, tenant):
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=2)
    make_node(gpu_type="nvidia", cards=8)
    _running(tenant, make_node(gpu_type="nvidia", cards=8), [0])
    make_node(gpu_type="ascend", cards=8)

    page = tenant_web.get("/").content.decode()

    # ascend: no row and nothing in use, yet shown — where the tenant has no guarantee it may only borrow.
    assert _figures(page, "nvidia") == ("1", "2", "0")
    assert _figures(page, "ascend") == (
        "0", '<span class="muted" title="no guarantee: it may only borrow">—</span>', "0")


def test_only_staff_see_or_change_the_sharing_page(tenant_web, tenant):
    assert Client().get("/sharing/").status_code == 302
    assert tenant_web.get("/sharing/").status_code == 403
    refused = tenant_web.post("/sharing/", {"form": "quotas", "tenant": tenant.id, "nominal_nvidia": "8"}, **HTMX)
    assert refused.status_code == 403
    assert tenant_web.post("/sharing/", {"form": "cohort", "name": "x", "tenants": [tenant.id]}).status_code == 403
    assert not TenantGpuQuota.objects.exists() and not Cohort.objects.exists()
    assert "/sharing/" not in tenant_web.get("/").content.decode()


def test_a_form_without_its_csrf_token_is_refused(admin_user, tenant):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(admin_user)
    assert 'name="csrfmiddlewaretoken"' in browser.get("/sharing/").content.decode()
    assert browser.post("/sharing/", {"form": "quotas", "tenant": tenant.id, "nominal_nvidia": "8"}).status_code == 403
    assert not TenantGpuQuota.objects.exists()


def test_staff_set_a_tenants_quotas_and_get_its_card_back(admin_web, tenant):
    node = make_node(cards=8)
    _running(tenant, node, [0, 1, 2])

    answer = admin_web.post("/sharing/", {"form": "quotas", "tenant": tenant.id, "nominal_nvidia": "4",
                                          "lending_limit_nvidia": "1.5", "nominal_ascend": "2",
                                          "borrowing_limit_ascend": ""}, **HTMX)

    assert answer.status_code == 200
    card = answer.content.decode()
    assert card.lstrip().startswith(f'<section class="card" id="tenant-{tenant.id}">') and "Saved" in card
    assert _figures(card, "nvidia") == ("3", "4", "0")
    assert 'name="lending_limit_nvidia" aria-label="nvidia lending_limit" placeholder="all" value="1.5"' in card
    assert sorted(TenantGpuQuota.objects.values_list("gpu_type", "nominal", "borrowing_limit", "lending_limit")) == [
        ("ascend", 2, None, None), ("nvidia", 4, None, 1.5)]
    assert TenancyAuditEntry.objects.get(action="tenant.quotas").actor == admin_web.user

    # Without htmx: saved, then back to the page.
    assert admin_web.post("/sharing/", {"form": "quotas", "tenant": tenant.id}).status_code == 302
    assert not TenantGpuQuota.objects.exists()


@pytest.mark.parametrize("posted, field, message", [
    ({"nominal_nvidia": "-1"}, "nominal_nvidia", "greater than or equal to 0"),
    ({"nominal_nvidia": "lots"}, "nominal_nvidia", "A valid number is required."),
    ({"borrowing_limit_musa": "2"}, "nominal_musa", "This field may not be null."),
    ({"nominal_nvidia": "4", "nominal_ascend": "1", "lending_limit_ascend": "3"}, "lending_limit_ascend",
     "lending_limit 3.00 is above nominal 1.00"),
])
def test_refused_quotas_show_the_error_beside_the_field_and_change_nothing(admin_web, tenant, posted, field,
                                                                           message):
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="hygon", nominal=1)
    body = {"form": "quotas", "tenant": tenant.id, **posted}

    card = admin_web.post("/sharing/", body, **HTMX).content.decode()

    error = re.search(rf'<div class="field-error" data-field="{field}">(.*?)</div>', card)
    assert error and message in error.group(1), card
    assert f'name="{field}"' in card and "Saved" not in card
    assert list(TenantGpuQuota.objects.values_list("gpu_type", "nominal")) == [("hygon", 1)]
    assert admin_web.post("/sharing/", body).status_code == 400


def test_staff_create_rename_and_delete_cohorts_in_the_page(admin_web, tenant, other_tenant):
    created = admin_web.post("/sharing/", {"form": "cohort", "name": "research",
                                           "tenants": [tenant.id, other_tenant.id]}, **HTMX)
    assert created.status_code == 200 and 'id="sharing-body"' in created.content.decode()
    cohort = Cohort.objects.get(name="research")
    assert set(cohort.tenants.values_list("name", flat=True)) == {"acme", "globex"}
    assert '<strong class="cohort-name">research</strong>' in created.content.decode()

    renamed = admin_web.post("/sharing/", {"form": "cohort", "cohort": cohort.id, "name": "lab",
                                           "tenants": [tenant.id]}, **HTMX)
    assert "Saved cohort lab." in renamed.content.decode()
    assert list(Cohort.objects.get(id=cohort.id).tenants.values_list("name", flat=True)) == ["acme"]

    deleted = admin_web.post("/sharing/", {"form": "cohort-delete", "cohort": cohort.id})
    assert deleted.status_code == 302 and not Cohort.objects.exists()
    assert not Tenant.objects.filter(cohort__isnull=False).exists()


def test_refused_cohorts_show_the_error_beside_the_field(admin_web, tenant, other_tenant):
    Cohort.objects.create(name="research")
    Tenant.objects.filter(id=tenant.id).update(cohort=Cohort.objects.get())

    taken = admin_web.post("/sharing/", {"form": "cohort", "name": "ops", "tenants": [other_tenant.id, tenant.id]},
                           **HTMX).content.decode()
    assert re.search(r'<div class="field-error" data-field="tenants">tenant acme is already in cohort research',
                     taken)
    blank = admin_web.post("/sharing/", {"form": "cohort", "name": "", "tenants": [other_tenant.id]}, **HTMX)
    assert re.search(r'<div class="field-error" data-field="name">This field may not be blank.</div>',
                     blank.content.decode())
    assert list(Cohort.objects.values_list("name", flat=True)) == ["research"]
    assert admin_web.post("/sharing/", {"form": "cohort", "name": "research", "tenants": []}).status_code == 400


def test_the_diagnostics_page_lists_borrowed_work(admin_web, tenant):
    tenant.cohort = Cohort.objects.create(name="research")
    tenant.save()
    node = make_node(cards=8)
    lent = _running(tenant, node, [0], borrowed=True)
    own = _running(tenant, node, [1])

    page = admin_web.get("/diagnostics/").content.decode()

    borrowed = page[page.index('id="borrowed-work"'):]
    assert "1 active task beyond" in borrowed
    assert f'id="borrowed-{lent.id}"' in borrowed and f'id="borrowed-{own.id}"' not in borrowed
    assert "<td>research</td>" in borrowed


def test_the_quota_form_offers_the_types_the_cluster_has_and_those_the_tenant_has_a_row_for(admin_web, tenant):
    make_node(gpu_type="nvidia")
    make_node(gpu_type="metax")
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="hygon", nominal=1)

    page = admin_web.get("/sharing/").content.decode()

    offered = set(re.findall(r'name="nominal_(\w+)"', page))
    assert offered == {"nvidia", "metax", "hygon"}


def test_leaving_a_recently_used_type_without_a_row_asks_to_confirm_naming_it(admin_web, tenant):
    make_node(gpu_type="nvidia")
    make_node(gpu_type="metax")
    today = timezone.now().date()
    UsageRecord.objects.create(tenant=tenant, day=today - timedelta(days=2), gpu_type="metax",
                               task_type="batch", card_seconds=3600)
    UsageRecord.objects.create(tenant=tenant, day=today - timedelta(days=30), gpu_type="ascend",
                               task_type="batch", card_seconds=3600)
    body = {"form": "quotas", "tenant": tenant.id, "nominal_nvidia": "16"}

    card = admin_web.post("/sharing/", body, **HTMX).content.decode()

    warning = re.search(rf'id="uncovered-{tenant.id}".*?</div>', card, re.S).group(0)
    assert "used metax in the last 7 days" in warning and "ascend" not in warning
    assert 'name="nominal_nvidia" aria-label="nvidia nominal" placeholder="none" value="16"' in card
    assert not TenantGpuQuota.objects.exists()
    assert admin_web.post("/sharing/", body).status_code == 409

    confirmed = admin_web.post("/sharing/", {**body, "confirmed_uncovered": "metax"}, **HTMX).content.decode()

    assert "Saved" in confirmed
    assert list(TenantGpuQuota.objects.values_list("gpu_type", "nominal")) == [("nvidia", 16)]


def test_a_row_for_the_recently_used_type_needs_no_confirmation(admin_web, tenant):
    UsageRecord.objects.create(tenant=tenant, day=timezone.now().date(), gpu_type="metax", task_type="batch",
                               card_seconds=60)

    card = admin_web.post("/sharing/", {"form": "quotas", "tenant": tenant.id, "nominal_nvidia": "16",
                                        "nominal_metax": "2"}, **HTMX).content.decode()

    assert "Saved" in card and "uncovered-" not in card
    assert TenantGpuQuota.objects.count() == 2
