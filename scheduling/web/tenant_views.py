"""The tenants page (staff): every tenant with its limits, cohort, members and dedicated nodes; create a tenant,
change its limits or deactivate it, move it to another cohort, choose its dedicated nodes, add a user to it; every
user with their rights, deactivated or reactivated here. Validated as the tenants API validates (`tenants.apis`), each
change made by the service the API and the other pages use."""

import re
from collections import defaultdict

from django.contrib.auth import get_user_model
from django.db.models import Count
from django.http import HttpResponseBadRequest
from django.shortcuts import get_object_or_404

from heteroflow_site.serializers import FORM_TEXT
from heteroflow_site.validation import positive_int_or_none
from heteroflow_site.web import render_page, staff_required
from nodes.models import Node
from nodes.services import tenant_dedicated_nodes_set
from scheduling import lifecycle
from scheduling.fair_share.services import tenant_cohort_set
from scheduling.models import Task
from scheduling.web.forms import submitted
from tenants.apis import TenantDetailApi, TenantListCreateApi, TenantUserCreateApi
from tenants.models import Cohort, Tenant, TenantMembership
from tenants.services import (
    tenant_create,
    tenant_update,
    tenant_user_create,
    user_active_set,
    user_password_reset_path,
    user_staff_set,
)

USERS_SHOWN = 500


def _valid(serializer_class, data: dict) -> dict:
    payload = serializer_class(data=data, context=FORM_TEXT)
    payload.is_valid(raise_exception=True)
    return payload.validated_data


def _submitted(create) -> tuple:
    """`submitted`, with the errors that name no field under "general" (templates cannot read "__all__")."""
    created, errors = submitted(create)
    return created, {("general" if field == "__all__" else field): texts for field, texts in errors.items()}


def _text_or_none(value: str) -> str | None:
    return value.strip() or None


def _create(request) -> dict:
    values = {"name": request.POST.get("name", "").strip(), "gpu_quota": request.POST.get("gpu_quota", "")}
    created, errors = _submitted(lambda: tenant_create(actor=request.user, **_valid(
        TenantListCreateApi.InputSerializer, {"name": values["name"], "gpu_quota": _text_or_none(values["gpu_quota"])})))
    if errors:
        return {"new_errors": errors, "new_values": values}
    return {"notice": f"Created tenant {created.name}.", "changed": created.id}


def _limits(request, tenant: Tenant) -> dict:
    data = {"gpu_quota": _text_or_none(request.POST.get("gpu_quota", "")),
            "max_priority": request.POST.get("max_priority", "").strip(), "status": request.POST.get("status", "")}
    _, errors = _submitted(lambda: tenant_update(tenant_id=tenant.id, actor=request.user,
                                                **_valid(TenantDetailApi.InputSerializer, data)))
    if errors:
        return {"row_errors": {tenant.id: errors}, "row_values": {tenant.id: data}}
    return {"notice": f"Saved {tenant.name}.", "changed": tenant.id}


def _add_user(request, tenant: Tenant) -> dict:
    data = {"username": request.POST.get("username", "").strip(), "password": request.POST.get("password", "")}
    created, errors = _submitted(lambda: tenant_user_create(tenant=tenant, actor=request.user,
                                                           **_valid(TenantUserCreateApi.InputSerializer, data)))
    if errors:
        return {"user_errors": {tenant.id: errors}, "user_values": {tenant.id: {"username": data["username"]}}}
    return {"notice": f"Added {created[0].username} to {tenant.name}: they sign in with the password you chose.",
            "changed": tenant.id}


def _cohort(request, tenant: Tenant) -> dict:
    raw = request.POST.get("cohort", "").strip()
    cohort_id = positive_int_or_none(raw) if raw else None
    if raw and cohort_id is None:
        errors = {"cohort": ["choose a cohort from the list"]}
    else:
        moved, errors = _submitted(lambda: tenant_cohort_set(tenant_id=tenant.id, cohort_id=cohort_id,
                                                             actor=request.user))
    if errors:
        return {"cohort_errors": {tenant.id: errors}}
    where = f"in cohort {moved.cohort.name}" if moved.cohort_id else "in no cohort"
    return {"notice": f"{tenant.name} is {where}.", "changed": tenant.id}


def _dedicated_nodes(request, tenant: Tenant) -> dict:
    text = request.POST.get("dedicated_nodes", "")
    names = [name for name in re.split(r"[\s,]+", text) if name]
    dedicated, errors = _submitted(lambda: tenant_dedicated_nodes_set(tenant=tenant, node_names=names,
                                                                      actor=request.user))
    if errors:
        return {"nodes_errors": {tenant.id: errors}, "nodes_values": {tenant.id: text}}
    count = len(dedicated)
    return {"notice": f"{tenant.name} has {count} dedicated node{'s' if count != 1 else ''}.", "changed": tenant.id}


def _counts(queryset, by: str) -> dict[int, int]:
    return dict(queryset.values_list(by).annotate(n=Count("id")).order_by())


def _staff(request, user) -> dict:
    make_staff = request.POST.get("is_staff") == "true"
    _, errors = _submitted(lambda: user_staff_set(user_id=user.id, is_staff=make_staff, actor=request.user))
    if errors:
        return {"staff_errors": {user.id: errors}}
    return {"notice": f"{user.username} is {'now' if make_staff else 'no longer'} an administrator."}


def _active(request, user) -> dict:
    activate = request.POST.get("is_active") == "true"
    _, errors = _submitted(lambda: user_active_set(user_id=user.id, is_active=activate, actor=request.user))
    if errors:
        return {"active_errors": {user.id: errors}}
    if activate:
        return {"notice": f"{user.username} is active again: they sign in and issue new API tokens."}
    return {"notice": f"{user.username} is deactivated: they cannot sign in and their API tokens are revoked."}


def _reset_link(request, user) -> dict:
    path = user_password_reset_path(user=user, actor=request.user)
    return {"notice": f"Send {user.username} this one-time link to set a new password:",
            "reset_link": request.build_absolute_uri(path)}


TENANT_FORMS = {"limits": _limits, "user": _add_user, "cohort": _cohort, "nodes": _dedicated_nodes}
USER_FORMS = {"staff": _staff, "active": _active, "reset": _reset_link}
# Each refusal's errors, by tenant (or user) id: one of them makes the answer a 400.
REFUSALS = ("row_errors", "user_errors", "cohort_errors", "nodes_errors", "new_errors", "staff_errors",
            "active_errors")


def _dedicated_names() -> dict[int, list[str]]:
    """Per tenant, the names of its dedicated nodes: one query for the whole page."""
    names: dict[int, list[str]] = defaultdict(list)
    for tenant_id, name in (Node.objects.filter(dedicated_tenant__isnull=False).order_by("name")
                            .values_list("dedicated_tenant_id", "name")):
        names[tenant_id].append(name)
    return names


@staff_required
def tenants_page(request):
    outcome: dict = {}
    if request.method == "POST":
        action = request.POST.get("form", "")
        if action == "create":
            outcome = _create(request)
        elif action in USER_FORMS:
            user = get_object_or_404(get_user_model(), id=positive_int_or_none(request.POST.get("user", "")))
            outcome = USER_FORMS[action](request, user)
        elif action in TENANT_FORMS:
            tenant = get_object_or_404(Tenant, id=positive_int_or_none(request.POST.get("tenant", "")))
            outcome = TENANT_FORMS[action](request, tenant)
        else:
            return HttpResponseBadRequest("unknown form")
    tenants = Tenant.objects.select_related("cohort").order_by("name")
    members = _counts(TenantMembership.objects.all(), "tenant")
    dedicated = _dedicated_names()
    active = _counts(Task.objects.filter(status__in=lifecycle.ACTIVE_STATES), "tenant")

    def of(key: str, tenant: Tenant, default=None):
        return outcome.get(key, {}).get(tenant.id, default)

    rows = [{"tenant": tenant, "members": members.get(tenant.id, 0), "dedicated": dedicated.get(tenant.id, []),
             "active": active.get(tenant.id, 0), "errors": of("row_errors", tenant, {}),
             "values": of("row_values", tenant), "user_errors": of("user_errors", tenant, {}),
             "user_values": of("user_values", tenant, {}), "cohort_errors": of("cohort_errors", tenant, {}),
             "nodes_errors": of("nodes_errors", tenant, {}), "nodes_value": of("nodes_values", tenant)}
            for tenant in tenants]
    context = {
        "rows": rows,
        "cohorts": list(Cohort.objects.order_by("name")),
        "statuses": Tenant.Status.values,
        "notice": outcome.get("notice"),
        "changed": outcome.get("changed"),
        "new_errors": outcome.get("new_errors", {}),
        "new_values": outcome.get("new_values", {}),
        "reset_link": outcome.get("reset_link"),
        "users": (get_user_model().objects.select_related("membership__tenant")
                  .order_by("-is_staff", "username")[:USERS_SHOWN]),
        "staff_errors": outcome.get("staff_errors", {}),
        "active_errors": outcome.get("active_errors", {}),
    }
    refused = any(outcome.get(key) for key in REFUSALS)
    return render_page(request, "tenants/tenants.html", context, fragment="tenants-body" if request.htmx else None,
                       status=400 if refused else 200)
