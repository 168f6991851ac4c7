"""The tenants page (staff): every tenant with its limits, members and dedicated nodes; create a tenant, change its
limits or deactivate it, add a user to it. Validated as the tenants API validates (`tenants.apis`)."""

from django.contrib.auth import get_user_model
from django.db.models import Count
from django.shortcuts import get_object_or_404

from heteroflow_site.serializers import FORM_TEXT
from heteroflow_site.validation import positive_int_or_none
from heteroflow_site.web import render_page, staff_required
from nodes.models import Node
from scheduling import lifecycle
from scheduling.models import Task
from scheduling.web.forms import submitted
from tenants.apis import TenantDetailApi, TenantListCreateApi, TenantUserCreateApi
from tenants.models import Tenant, TenantMembership
from tenants.services import (
    tenant_create,
    tenant_update,
    tenant_user_create,
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


def _counts(queryset, by: str) -> dict[int, int]:
    return dict(queryset.values_list(by).annotate(n=Count("id")).order_by())


def _staff(request, user) -> dict:
    make_staff = request.POST.get("is_staff") == "true"
    _, errors = _submitted(lambda: user_staff_set(user_id=user.id, is_staff=make_staff, actor=request.user))
    if errors:
        return {"user_row_errors": {user.id: errors}}
    return {"notice": f"{user.username} is {'now' if make_staff else 'no longer'} an administrator."}


def _reset_link(request, user) -> dict:
    path = user_password_reset_path(user=user, actor=request.user)
    return {"notice": f"Send {user.username} this one-time link to set a new password:",
            "reset_link": request.build_absolute_uri(path)}


@staff_required
def tenants_page(request):
    outcome: dict = {}
    if request.method == "POST":
        action = request.POST.get("form", "")
        if action == "create":
            outcome = _create(request)
        elif action in ("staff", "reset"):
            user = get_object_or_404(get_user_model(), id=positive_int_or_none(request.POST.get("user", "")))
            outcome = (_staff if action == "staff" else _reset_link)(request, user)
        else:
            tenant = get_object_or_404(Tenant, id=positive_int_or_none(request.POST.get("tenant", "")))
            outcome = (_limits if action == "limits" else _add_user)(request, tenant)
    tenants = Tenant.objects.select_related("cohort").order_by("name")
    members = _counts(TenantMembership.objects.all(), "tenant")
    dedicated = _counts(Node.objects.filter(dedicated_tenant__isnull=False), "dedicated_tenant")
    active = _counts(Task.objects.filter(status__in=lifecycle.ACTIVE_STATES), "tenant")
    row_errors, row_values = outcome.get("row_errors", {}), outcome.get("row_values", {})
    user_errors, user_values = outcome.get("user_errors", {}), outcome.get("user_values", {})
    rows = [{"tenant": tenant, "members": members.get(tenant.id, 0), "dedicated": dedicated.get(tenant.id, 0),
             "active": active.get(tenant.id, 0), "errors": row_errors.get(tenant.id, {}), "values": row_values.get(tenant.id),
             "user_errors": user_errors.get(tenant.id, {}), "user_values": user_values.get(tenant.id, {})}
            for tenant in tenants]
    context = {
        "rows": rows,
        "statuses": Tenant.Status.values,
        "notice": outcome.get("notice"),
        "changed": outcome.get("changed"),
        "new_errors": outcome.get("new_errors", {}),
        "new_values": outcome.get("new_values", {}),
        "reset_link": outcome.get("reset_link"),
        "users": (get_user_model().objects.select_related("membership__tenant")
                  .order_by("-is_staff", "username")[:USERS_SHOWN]),
        "user_row_errors": outcome.get("user_row_errors", {}),
    }
    refused = any(outcome.get(key) for key in ("row_errors", "user_errors", "new_errors", "user_row_errors"))
    return render_page(request, "tenants/tenants.html", context, fragment="tenants-body" if request.htmx else None,
                       status=400 if refused else 200)
