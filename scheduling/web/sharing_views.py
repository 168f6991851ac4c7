"""The sharing page (design §16.2, staff only): every tenant's used / nominal / borrowed per GPU type, its per-type
quotas and the cohorts, edited here as with `PUT /api/v1/tenants/{id}/quotas` and `/api/v1/cohorts` — the same
serializers and services. One view serves the page and, for htmx, the fragment a form swaps: a tenant's card for its
quotas, the page's body for a cohort (membership shows on the tenant cards too)."""

import re
from datetime import timedelta

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect
from django.utils import timezone
from django.views.decorators.http import require_http_methods
from rest_framework.exceptions import ValidationError

from heteroflow_site.errors import DomainError
from heteroflow_site.serializers import FORM_TEXT, flat_errors
from heteroflow_site.web import render_page, staff_required
from nodes.models import GPU_TYPES
from scheduling.fair_share.apis import CohortDetailApi, CohortListCreateApi, QuotaLineInput
from scheduling.fair_share.selectors import cohorts_with_members, tenant_share, tenants_sharing
from scheduling.fair_share.services import (
    QuotaLine,
    cohort_create,
    cohort_delete,
    cohort_update,
    tenant_quotas_replace,
)
from scheduling.models import UsageRecord
from scheduling.web.forms import submitted
from tenants.models import Cohort, Tenant

TEMPLATE = "scheduling/sharing.html"
QUOTA_FIELDS = ("nominal", "borrowing_limit", "lending_limit")
PLACEHOLDERS = {"nominal": "none", "borrowing_limit": "unlimited", "lending_limit": "all"}
COHORT_FIELDS = ("name", "tenants")
# A type the tenant used this recently and would be left without a row is named before saving.
RECENT_USE = timedelta(days=7)


@staff_required
@require_http_methods(["GET", "POST"])
def sharing_page(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _render(request, {})
    handle = FORMS.get(request.POST.get("form", ""))
    if handle is None:
        return HttpResponseBadRequest("unknown form")
    return handle(request)


def _render(request: HttpRequest, overrides: dict, *, status: int = 200, fragment: str | None = None,
            notice: str = "") -> HttpResponse:
    """The page (or its body): `overrides` maps a tenant id to its quota form's submitted rows and errors, and
    "cohort:<id or new>" to a cohort form's."""
    tenants = tenants_sharing()
    context = {
        "shares": [{"share": share, "form": overrides.get(share.tenant.id) or _quota_form(share)}
                   for share in tenants],
        "tenants": [share.tenant for share in tenants],
        "cohorts": [{"cohort": cohort, "form": overrides.get(f"cohort:{cohort.id}") or _cohort_form(cohort)}
                    for cohort in cohorts_with_members()],
        "new_cohort": overrides.get("cohort:new") or {"name": "", "members": set(), "errors": {}, "general": []},
        "notice": notice,
    }
    return render_page(request, TEMPLATE, context, status=status, fragment=fragment)


# --- a tenant's quotas --------------------------------------------------------------------------------------------


def _form_types(share) -> list[str]:
    """The types a tenant's form offers: those of its figures, the cluster's and any it has a row for or uses (a row
    of a type no node has any more stays visible, so that saving does not drop it unseen)."""
    shown = {line.gpu_type for line in share.types}
    return [gpu_type for gpu_type in GPU_TYPES if gpu_type in shown]


def _recently_used_types(tenant: Tenant) -> set[str]:
    since = (timezone.now() - RECENT_USE).date()
    return set(UsageRecord.objects.filter(tenant=tenant, day__gte=since, card_seconds__gt=0)
               .exclude(gpu_type="").values_list("gpu_type", flat=True).distinct())


def _quota_form(share, *, saved: bool = False) -> dict:
    rows = {line.gpu_type: line for line in share.types if line.nominal is not None}
    types = _form_types(share)
    return _form_of([{"gpu_type": gpu_type, "values": {name: _text(getattr(rows[gpu_type], name)) if gpu_type in rows
                                                       else "" for name in QUOTA_FIELDS}, "errors": {}}
                     for gpu_type in types], saved=saved)


def _form_of(rows: list[dict], *, saved: bool = False, uncovered: list[str] | None = None) -> dict:
    """The quota form: a row per GPU type, a cell per input with its value and the errors beside it; `uncovered`:
    the recently used types the submitted quotas leave without a row, to confirm."""
    for row in rows:
        row["cells"] = [{"name": name, "value": row["values"][name], "errors": row["errors"].get(name, []),
                         "placeholder": PLACEHOLDERS[name]} for name in QUOTA_FIELDS]
    return {"rows": rows, "saved": saved, "uncovered": uncovered or [],
            "uncovered_key": ",".join(uncovered or [])}


def _text(value) -> str:
    return "" if value is None else f"{value:f}".rstrip("0").rstrip(".")


def _quotas(request: HttpRequest) -> HttpResponse:
    tenant = get_object_or_404(Tenant, id=_posted_id(request, "tenant"))
    rows = [{"gpu_type": gpu_type, "values": {name: request.POST.get(f"{name}_{gpu_type}", "").strip()
                                              for name in QUOTA_FIELDS}, "errors": {}} for gpu_type in GPU_TYPES]
    # A type whose inputs are all blank has no row: no guarantee there, it may only borrow (design §16.2).
    filled = [row for row in rows if any(row["values"].values())]
    shown = set(_form_types(tenant_share(tenant))) | {row["gpu_type"] for row in filled}
    rows = [row for row in rows if row["gpu_type"] in shown]
    uncovered = sorted(_recently_used_types(tenant) - {row["gpu_type"] for row in filled})
    # Saving without a row for a type the tenant works on leaves its tasks there waiting on borrowed cards: the
    # admin confirms that, for exactly these types.
    if uncovered and request.POST.get("confirmed_uncovered", "") != ",".join(uncovered):
        return _tenant_answer(request, tenant, _form_of(rows, uncovered=uncovered), status=409)
    try:
        _replace_quotas(request, tenant, filled)
    except (ValidationError, DomainError) as error:
        _place_quota_errors(error, filled)
        return _tenant_answer(request, tenant, _form_of(rows), status=400)
    if not request.htmx:
        messages.success(request, f"Saved the quotas of {tenant.name}.")
        return redirect("sharing")
    return _tenant_answer(request, tenant, _quota_form(tenant_share(tenant), saved=True))


def _replace_quotas(request: HttpRequest, tenant: Tenant, filled: list[dict]) -> None:
    data = [{"gpu_type": row["gpu_type"], **{name: value or None for name, value in row["values"].items()}}
            for row in filled]
    payload = QuotaLineInput(data=data, many=True, context=FORM_TEXT)
    payload.is_valid(raise_exception=True)
    tenant_quotas_replace(tenant_id=tenant.id, lines=[QuotaLine(**line) for line in payload.validated_data],
                          actor=request.user)


def _place_quota_errors(error: Exception, filled: list[dict]) -> None:
    """Each error beside its input: `[2].nominal` is the third filled row's nominal."""
    flat = {error.field or "": [error.message]} if isinstance(error, DomainError) else flat_errors(error.detail)
    for path, texts in flat.items():
        found = re.fullmatch(r"\[(\d+)\]\.?(\w*)", path)
        row = filled[int(found.group(1))] if found else filled[0]
        name = found.group(2) if found and found.group(2) in QUOTA_FIELDS else "nominal"
        row["errors"].setdefault(name, []).extend(texts)


def _tenant_answer(request: HttpRequest, tenant: Tenant, form: dict, *, status: int = 200) -> HttpResponse:
    """A refusal is a 400 page; to htmx, which swaps only 2xx answers, the card with its errors."""
    if not request.htmx:
        return _render(request, {tenant.id: form}, status=status)
    context = {"entry": {"share": tenant_share(tenant), "form": form}}
    return render_page(request, TEMPLATE, context, fragment="tenant-card")


# --- cohorts ------------------------------------------------------------------------------------------------------


def _cohort_form(cohort: Cohort) -> dict:
    return {"name": cohort.name, "members": {tenant.id for tenant in cohort.tenants.all()}, "errors": {},
            "general": []}


def _cohort_save(request: HttpRequest) -> HttpResponse:
    raw_id = request.POST.get("cohort", "")
    data = {"name": request.POST.get("name", ""), "tenants": request.POST.getlist("tenants")}
    if raw_id:
        cohort = get_object_or_404(Cohort, id=_posted_id(request, "cohort"))
        serializer, save = CohortDetailApi.InputSerializer, lambda fields: cohort_update(
            cohort_id=cohort.id, actor=request.user, **fields)
    else:
        cohort, serializer, save = None, CohortListCreateApi.InputSerializer, lambda fields: cohort_create(
            actor=request.user, **fields)

    def run():
        payload = serializer(data=data, context=FORM_TEXT)
        payload.is_valid(raise_exception=True)
        return save(payload.validated_data)

    saved, errors = submitted(run)
    if errors:
        members = {int(value) for value in data["tenants"] if value.isdigit()}
        form = {"name": data["name"], "members": members,
                "errors": {field: texts for field, texts in errors.items() if field in COHORT_FIELDS},
                "general": [text for field, texts in errors.items() if field not in COHORT_FIELDS for text in texts]}
        key = f"cohort:{cohort.id}" if cohort else "cohort:new"
        return _cohort_answer(request, {key: form}, status=400)
    return _cohort_answer(request, {}, notice=f"Saved cohort {saved.name}.")


def _cohort_delete(request: HttpRequest) -> HttpResponse:
    cohort = get_object_or_404(Cohort, id=_posted_id(request, "cohort"))
    cohort_delete(cohort_id=cohort.id, actor=request.user)
    return _cohort_answer(request, {}, notice=f"Deleted cohort {cohort.name}: its tenants lend and borrow no more.")


def _cohort_answer(request: HttpRequest, overrides: dict, *, status: int = 200, notice: str = "") -> HttpResponse:
    if not request.htmx:
        if status != 200:
            return _render(request, overrides, status=status)
        messages.success(request, notice)
        return redirect("sharing")
    return _render(request, overrides, fragment="sharing-body", notice=notice)


def _posted_id(request: HttpRequest, name: str) -> int:
    raw = request.POST.get(name, "")
    if not raw.isdigit():
        raise Http404(f"no {name} {raw!r}")
    return int(raw)


FORMS = {"quotas": _quotas, "cohort": _cohort_save, "cohort-delete": _cohort_delete}
