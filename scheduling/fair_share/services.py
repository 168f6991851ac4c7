"""Writes of quota sharing (design §16.2): a tenant's per-type quotas and the cohorts. Each owns its transaction,
audits the change and tells the scheduler (`tenancy_changed`), whose next attempt follows the new rules; tasks
already placed keep running (a lender's guarantee comes back by reclaim)."""

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from django.db import transaction

from heteroflow_site.errors import Conflict, DomainError, NotAllowed, NotFoundReference
from nodes.models import GPU_TYPES
from tenants.models import Cohort, TenancyAuditEntry, Tenant, TenantGpuQuota
from tenants.signals import tenancy_changed


@dataclass(frozen=True)
class QuotaLine:
    """One per-type quota as submitted: cards, two decimals; None limits are unlimited / all of it."""

    gpu_type: str
    nominal: Decimal
    borrowing_limit: Decimal | None = None
    lending_limit: Decimal | None = None


def _check_lines(lines: Sequence[QuotaLine]) -> None:
    """Each refusal names its line as the API's own validation does (`[1].lending_limit`), so a form shows it
    beside the field."""
    seen = set()
    for index, line in enumerate(lines):
        if line.gpu_type not in GPU_TYPES:
            raise DomainError(f"unknown GPU type {line.gpu_type!r}; one of {', '.join(GPU_TYPES)}",
                              field=f"[{index}].gpu_type")
        if line.gpu_type in seen:
            raise NotAllowed(f"{line.gpu_type} is listed twice", field=f"[{index}].gpu_type")
        seen.add(line.gpu_type)
        for name in ("nominal", "borrowing_limit", "lending_limit"):
            value = getattr(line, name)
            if value is not None and (not value.is_finite() or value < 0):
                raise DomainError(f"{name} must be a finite number of cards, 0 or more", field=f"[{index}].{name}")
        if line.lending_limit is not None and line.lending_limit > line.nominal:
            raise NotAllowed(f"lending_limit {line.lending_limit} is above nominal {line.nominal}: a tenant lends "
                             "only its own unused nominal", field=f"[{index}].lending_limit")


def _quota_details(tenant_id: int) -> list[dict]:
    return [{"gpu_type": gpu_type, "nominal": str(nominal), "borrowing_limit": _text(borrowing),
             "lending_limit": _text(lending)}
            for gpu_type, nominal, borrowing, lending in TenantGpuQuota.objects.filter(tenant_id=tenant_id)
            .values_list("gpu_type", "nominal", "borrowing_limit", "lending_limit")]


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def tenant_quotas_replace(*, tenant_id: int, lines: Sequence[QuotaLine], actor=None) -> list[TenantGpuQuota]:
    """Replace the tenant's per-type quotas with `lines` (none: only `gpu_quota` applies again)."""
    _check_lines(lines)
    with transaction.atomic():
        tenant = Tenant.objects.select_for_update().get(id=tenant_id)
        before = _quota_details(tenant.id)
        TenantGpuQuota.objects.filter(tenant=tenant).delete()
        quotas = TenantGpuQuota.objects.bulk_create(
            TenantGpuQuota(tenant=tenant, gpu_type=line.gpu_type, nominal=line.nominal,
                           borrowing_limit=line.borrowing_limit, lending_limit=line.lending_limit)
            for line in lines)
        tenancy_changed.send(sender=Tenant, tenant_id=tenant.id, reason=f"tenant {tenant.name} quotas changed")
        TenancyAuditEntry.objects.create(actor=actor, action="tenant.quotas", target=tenant.name,
                                         details={"before": before, "after": _quota_details(tenant.id)})
    return quotas


def _set_members(cohort: Cohort, tenants: Sequence[Tenant]) -> None:
    """`tenants` become the cohort's members (a tenant is in at most one cohort); the others leave it."""
    ids = sorted({tenant.id for tenant in tenants})
    taken = (Tenant.objects.select_for_update().filter(id__in=ids, cohort__isnull=False)
             .exclude(cohort=cohort).order_by("id").first())
    if taken is not None:
        raise Conflict(f"tenant {taken.name} is already in cohort {taken.cohort.name}; a tenant is in at most one",
                          field="tenants")
    Tenant.objects.filter(cohort=cohort).exclude(id__in=ids).update(cohort=None)
    Tenant.objects.filter(id__in=ids).update(cohort=cohort)


def cohort_create(*, name: str, tenants: Sequence[Tenant], actor=None) -> Cohort:
    with transaction.atomic():
        if Cohort.objects.filter(name=name).exists():
            raise Conflict(f"a cohort named {name!r} already exists", field="name")
        cohort = Cohort.objects.create(name=name)
        _set_members(cohort, tenants)
        tenancy_changed.send(sender=Cohort, tenant_id=None, reason=f"cohort {name} created")
        TenancyAuditEntry.objects.create(actor=actor, action="cohort.create", target=name,
                                         details={"tenants": sorted(tenant.id for tenant in tenants)})
    return cohort


def cohort_update(*, cohort_id: int, name: str | None = None, tenants: Sequence[Tenant] | None = None,
                  actor=None) -> Cohort:
    """Rename the cohort and/or replace its members (None: unchanged)."""
    with transaction.atomic():
        cohort = Cohort.objects.select_for_update().get(id=cohort_id)
        before = {"name": cohort.name, "tenants": sorted(cohort.tenants.values_list("id", flat=True))}
        if name is not None and name != cohort.name:
            if Cohort.objects.filter(name=name).exclude(id=cohort_id).exists():
                raise Conflict(f"a cohort named {name!r} already exists", field="name")
            cohort.name = name
            cohort.save(update_fields=["name"])
        if tenants is not None:
            _set_members(cohort, tenants)
        after = {"name": cohort.name, "tenants": sorted(cohort.tenants.values_list("id", flat=True))}
        tenancy_changed.send(sender=Cohort, tenant_id=None, reason=f"cohort {cohort.name} changed")
        TenancyAuditEntry.objects.create(actor=actor, action="cohort.update", target=cohort.name,
                                         details={"before": before, "after": after})
    return cohort


def tenant_cohort_set(*, tenant_id: int, cohort_id: int | None, actor=None) -> Tenant:
    """Move the tenant into the cohort (None: out of any): it lends and borrows with that cohort's tenants from the
    next attempt on; what it borrows now runs on until reclaimed or done."""
    with transaction.atomic():
        # The cohort before the tenant, as cohort_delete locks them: a deletion at the same time waits, not deadlocks.
        cohort = Cohort.objects.select_for_update().filter(id=cohort_id).first() if cohort_id is not None else None
        if cohort_id is not None and cohort is None:
            raise NotFoundReference("that cohort no longer exists: reload the page", field="cohort")
        tenant = Tenant.objects.select_for_update().get(id=tenant_id)
        if tenant.cohort_id == cohort_id:
            return tenant
        before = Cohort.objects.filter(id=tenant.cohort_id).values_list("name", flat=True).first()
        tenant.cohort = cohort
        tenant.save(update_fields=["cohort"])
        tenancy_changed.send(sender=Tenant, tenant_id=tenant.id, reason=f"tenant {tenant.name} cohort changed")
        TenancyAuditEntry.objects.create(actor=actor, action="tenant.cohort", target=tenant.name,
                                         details={"before": before, "after": cohort.name if cohort else None})
    return tenant


def cohort_delete(*, cohort_id: int, actor=None) -> None:
    """The cohort's tenants lend and borrow no more; what they borrow now runs on until reclaimed or done."""
    with transaction.atomic():
        cohort = Cohort.objects.select_for_update().get(id=cohort_id)
        before = {"name": cohort.name, "tenants": sorted(cohort.tenants.values_list("id", flat=True))}
        cohort.delete()
        tenancy_changed.send(sender=Cohort, tenant_id=None, reason=f"cohort {before['name']} deleted")
        TenancyAuditEntry.objects.create(actor=actor, action="cohort.delete", target=before["name"],
                                         details={"before": before, "after": None})
