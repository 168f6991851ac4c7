"""Tenant GPU quotas (design §1, §16.2): the total cap `gpu_quota`, per-type nominal quotas and cohorts.

A cycle loads them and the usage once into its snapshot (`load_quota_book`); the framework's quota PreFilter admits
each task by them and every bind of the cycle updates the usage, so several tasks of one tenant in one cycle cannot
overshoot together. Across scheduler instances the bind pipeline applies the same rule again under the cohort's and
the tenants' row locks (`scheduling.bind`).
"""

from collections.abc import Iterable
from decimal import Decimal

from django.db.models import BooleanField, Exists, F, Func, Max, OuterRef, Q, QuerySet, Subquery, Sum

from nodes.models import GPU
from scheduling.fair_share.book import CARD, QuotaBook, TypeQuota
from scheduling.fair_share.usage import share_expression, type_expression
from scheduling.framework.snapshot import NodeInfo
from scheduling.lifecycle import ACTIVE_STATES
from scheduling.models import Task
from tenants.models import Tenant, TenantGpuQuota


class _AnyOf(Func):
    """`tenant_id = ANY(ARRAY(subquery))`: PostgreSQL runs the subquery once, before the scan, and looks the tasks
    up by tenant; with `IN (subquery)` it may read every active task first and join (50 ms at 10,000 running)."""

    template = "%(expressions)s))"
    arg_joiner = " = ANY(ARRAY("
    output_field = BooleanField()


def tenant_gpu_usage_rows(tenant_ids: Iterable[int] | QuerySet | None = None) -> QuerySet:
    """THE tenant-usage reader: (tenant id, GPU type, borrowed, hundredths of a card) rows of what active tasks
    hold, fractional ones as their share of the card (design §16.2); only `tenant_ids` when given. The bind's
    locked read runs this same query in its pipeline."""
    rows = Task.objects.filter(Q(gpu_required__gt=0) | Q(gpu_memory_mb__gt=0), status__in=ACTIVE_STATES)
    if isinstance(tenant_ids, QuerySet):
        rows = rows.filter(_AnyOf(F("tenant_id"), Subquery(tenant_ids.order_by())))
    elif tenant_ids is not None:
        rows = rows.filter(tenant_id__in=list(tenant_ids))
    return (rows.annotate(usage_type=type_expression(), share=share_expression())
            .values("tenant_id", "usage_type", "borrowed").annotate(used=Sum("share")).order_by()
            .values_list("tenant_id", "usage_type", "borrowed", "used"))


def tenant_gpu_usage(tenant_ids: Iterable[int] | None = None) -> dict[int, Decimal]:
    """Cards held by each tenant's active tasks over every type, two decimals (tenants holding none are absent)."""
    usage: dict[int, int] = {}
    for tenant_id, _, _, used in tenant_gpu_usage_rows(tenant_ids):
        usage[tenant_id] = usage.get(tenant_id, 0) + int(used)
    return {tenant_id: Decimal(used) / CARD for tenant_id, used in usage.items() if used}


def hundredths(cards: Decimal | int | None) -> int | None:
    return None if cards is None else int(round(Decimal(cards) * CARD))


def fill_book(book: QuotaBook, tenants: Iterable[tuple[int, int | None, int | None]],
              rows: Iterable[tuple[int, str, Decimal, Decimal | None, Decimal | None]],
              usage: Iterable[tuple[int, str, bool, int]]) -> QuotaBook:
    """The book from (tenant, gpu_quota, cohort) rows, quota rows and `tenant_gpu_usage_rows`: the one filling the
    snapshot's load and the bind's live read share."""
    for tenant_id, gpu_quota, cohort_id in tenants:
        if gpu_quota is not None:
            book.caps[tenant_id] = CARD * gpu_quota
        if cohort_id is not None:
            book.cohort_of[tenant_id] = cohort_id
            book.members[cohort_id] = (*book.members.get(cohort_id, ()), tenant_id)
    for tenant_id, gpu_type, nominal, borrowing_limit, lending_limit in rows:
        book.nominal.setdefault(tenant_id, {})[gpu_type] = TypeQuota(
            hundredths(nominal), hundredths(borrowing_limit), hundredths(lending_limit))
    for tenant_id, gpu_type, borrowed, used in usage:
        book.add_usage(tenant_id, gpu_type, borrowed, int(used))
    return book


def largest_cards(nodes: Iterable[NodeInfo] | None = None) -> dict[str, int]:
    """GPU type → the memory of its largest card ("" → of any type): of `nodes` when given (a snapshot's, which
    holds every node with its cards: a cycle need not group every card row of the cluster again), else read."""
    if nodes is None:
        rows = GPU.objects.values("type").annotate(largest=Max("memory_total_mb")).order_by().values_list(
            "type", "largest")
    else:
        rows = (item for node in nodes for item in _largest_on(node).items())
    largest: dict[str, int] = {}
    for gpu_type, memory in rows:
        if memory > largest.get(gpu_type, -1):
            largest[gpu_type] = memory
    return {**largest, "": max(largest.values(), default=0)}


_LARGEST_CARDS = "largest-cards"


def _largest_on(node: NodeInfo) -> dict[str, int]:
    """The node's largest card of each type, kept in the node's cache: a cycle reads again only the nodes that changed
    since the last (a bind or a re-read clears the cache), not every card of the cluster."""
    largest = node.cache.get(_LARGEST_CARDS)
    if largest is None:
        largest = node.cache[_LARGEST_CARDS] = {}
        for card in node.cards:
            if card.memory_total_mb > largest.get(card.type, -1):
                largest[card.type] = card.memory_total_mb
    return largest


# Tenants a quota book limits: a total cap, a cohort or per-type quota rows. Admission weighs no one else's usage
# (QuotaBook.admit, lendable, reclaim_lenders, dominant_share), so the scheduler reads only theirs.
LIMITED = Q(gpu_quota__isnull=False) | Q(cohort__isnull=False) | Q(
    Exists(TenantGpuQuota.objects.filter(tenant_id=OuterRef("pk"))))


def load_quota_book(*, limited_only: bool = False, nodes: Iterable[NodeInfo] | None = None) -> QuotaBook:
    """Every tenant's caps, quota rows, cohort and usage, and the largest card of each type (of `nodes` when given,
    a snapshot's, else read): up to four queries.

    `limited_only`: the usage of the LIMITED tenants only, what admission needs (the scheduler's cycle). Reading
    every active task's share costs ~100 ms a cycle at 10,000 running tasks, grows with them, and is wasted on a
    cluster without quotas."""
    tenants = list(Tenant.objects.filter(Q(gpu_quota__isnull=False) | Q(cohort__isnull=False)).values_list(
        "id", "gpu_quota", "cohort_id"))
    rows = list(TenantGpuQuota.objects.values_list("tenant_id", "gpu_type", "nominal", "borrowing_limit",
                                                   "lending_limit"))
    if limited_only:
        # LIMITED's tenants are those of the two reads above: a cluster without quotas reads no usage at all.
        limited = {tenant_id for tenant_id, _, _ in tenants} | {row[0] for row in rows}
        usage = tenant_gpu_usage_rows(sorted(limited)) if limited else ()
    else:
        usage = tenant_gpu_usage_rows()
    return fill_book(QuotaBook(largest_card_mb=largest_cards(nodes)), tenants, rows, usage)


def inactive_tenant_ids() -> frozenset[int]:
    """Tenants whose pending tasks the scheduler holds (design §15.6)."""
    return frozenset(Tenant.objects.filter(status=Tenant.Status.INACTIVE).values_list("id", flat=True))
