"""Fair-share order (design §16.2): among entries of equal priority, the tenant with the lowest dominant share
first, then creation (design §15.1 otherwise). The cycle reorders the window it took from the queue, with each
tenant's share computed once from the cycle's quota book: no query per task."""

from scheduling.fair_share.book import QuotaBook
from scheduling.queue.entries import TASK, QueueEntry


def fair_share_order(entries: list[QueueEntry], book: QuotaBook) -> list[QueueEntry]:
    shares: dict[int | None, float] = {}
    for entry in entries:
        if entry.tenant_id not in shares:
            shares[entry.tenant_id] = book.dominant_share(entry.tenant_id) if entry.tenant_id is not None else 1.0
    return sorted(entries, key=lambda entry: (-entry.priority, shares[entry.tenant_id], entry.created_at,
                                              entry.kind != TASK, entry.id))
