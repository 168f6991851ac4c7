"""Reads of quota sharing (design §16.2) for the API, the pages and the metrics: all from the quota book the
scheduler admits by (`scheduling.fair_share.quotas.load_quota_book`, THE usage reader), so they show what it sees."""

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from django.db.models import QuerySet

from nodes.selectors import cluster_gpu_types
from scheduling.fair_share.book import CARD, QuotaBook
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task
from scheduling.fair_share.quotas import load_quota_book
from tenants.models import Cohort, Tenant


@dataclass(frozen=True)
class TypeSharing:
    """One tenant's figures for one GPU type, in cards: `borrowed` is what its tasks admitted by borrowing hold,
    `lent` what other tenants of its cohort borrow beyond their nominal that its unused nominal covers."""

    gpu_type: str
    nominal: Decimal | None
    borrowing_limit: Decimal | None
    lending_limit: Decimal | None
    used: Decimal
    borrowed: Decimal
    lent: Decimal


def _cards(hundredths: int | None) -> Decimal | None:
    return None if hundredths is None else Decimal(hundredths) / CARD


def _lent(book: QuotaBook, tenant_id: int, gpu_type: str) -> int:
    """The tenant's unused nominal that cohort members' borrowing takes up, shared among lenders in proportion
    to what each has to lend."""
    cohort = book.cohort_of.get(tenant_id)
    if cohort is None or tenant_id not in book.nominal:
        return 0
    members = [member for member in book.members.get(cohort, ()) if member in book.nominal]
    lendable = {member: max(0, book.nominal_of(member, gpu_type) - book.type_used(member, gpu_type))
                for member in members}
    borrowed = sum(book.over_nominal(member, gpu_type) for member in members)
    total = sum(lendable.values())
    return round(borrowed * lendable[tenant_id] / total) if total else 0


def tenant_sharing(tenant_id: int, book: QuotaBook | None = None, *,
                   also_types: Iterable[str] = ()) -> list[TypeSharing]:
    """Per GPU type the tenant has a quota row for or uses, and each of `also_types`: nominal, limits, used,
    borrowed, lent."""
    book = book if book is not None else load_quota_book()
    rows = book.nominal.get(tenant_id, {})
    types = sorted(set(rows) | set(also_types) | {gpu_type for (tenant, gpu_type), used in book.used.items()
                                                  if tenant == tenant_id and used})
    return [TypeSharing(
        gpu_type=gpu_type,
        nominal=_cards(rows[gpu_type].nominal) if gpu_type in rows else None,
        borrowing_limit=_cards(rows[gpu_type].borrowing_limit) if gpu_type in rows else None,
        lending_limit=_cards(rows[gpu_type].lending_limit) if gpu_type in rows else None,
        used=_cards(book.type_used(tenant_id, gpu_type)),
        borrowed=_cards(book.borrowed_used.get((tenant_id, gpu_type), 0)),
        lent=_cards(_lent(book, tenant_id, gpu_type)),
    ) for gpu_type in types]


@dataclass(frozen=True)
class TenantShare:
    """A tenant, its cohort (on `tenant.cohort`) and its figures per GPU type."""

    tenant: Tenant
    types: list[TypeSharing]


def tenant_overview(tenant_id: int) -> list[TypeSharing]:
    """Every GPU type the cluster has (and any other the tenant has a row for or uses), a type without a row shown
    as such: a tenant sees where it has no guarantee, not only where it has one. What its dashboard,
    `GET /api/v1/quota` and `hf quota` show."""
    return tenant_sharing(tenant_id, also_types=cluster_gpu_types())


def tenant_share(tenant: Tenant) -> TenantShare:
    """The tenant's overview: its cohort and used / nominal / borrowed per type of the cluster."""
    return TenantShare(tenant, tenant_overview(tenant.id))


def tenants_sharing() -> list[TenantShare]:
    """Every tenant with its cohort and figures per type of the cluster, from one quota book (the sharing page)."""
    book, cluster_types = load_quota_book(), cluster_gpu_types()
    return [TenantShare(tenant, tenant_sharing(tenant.id, book, also_types=cluster_types))
            for tenant in Tenant.objects.select_related("cohort").order_by("name")]


def cohorts_with_members() -> list[Cohort]:
    return list(Cohort.objects.prefetch_related("tenants"))


def borrowed_work() -> QuerySet:
    """Active tasks admitted by borrowing their cohort's quota: what a reclaim may evict (the diagnostics page)."""
    return (Task.objects.filter(borrowed=True, status__in=ACTIVE_STATES).select_related("tenant", "node")
            .order_by("tenant__name", "created_at", "id"))
