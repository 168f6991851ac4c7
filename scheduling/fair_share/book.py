"""The quota book (design §1, §16.2): every tenant's caps, per-type nominal quotas, cohorts and usage, and THE
admission rule the snapshot's quota PreFilter and bind (under the cohort's and tenants' row locks) both apply.

Pure Python, no ORM: `scheduling.fair_share.quotas` fills it from the database. Amounts are in hundredths of a card (ints),
so sums of fractional shares are exact; a whole card is 100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scheduling.framework.task import TaskInfo

CARD = 100
BATCH = "batch"


def card_share(task: TaskInfo, card_memory_mb: int) -> int:
    """What `task` counts against quotas, in hundredths of a card (design §16.2): `gpu_required` whole cards, or
    `gpu_memory_mb / card memory` of its card for a fractional task (at least 0.01; a whole card when the card's
    memory is unknown: fail closed). `scheduling.fair_share.usage.SHARE_SQL` is the same rule in SQL."""
    if task.gpu_required > 0:
        return CARD * task.gpu_required
    if not task.is_fractional:
        return 0
    if card_memory_mb <= 0:
        return CARD
    return max(1, min(CARD, round(CARD * task.gpu_memory_mb / card_memory_mb)))


def may_borrow(task: TaskInfo) -> bool:
    """Only tasks §9 allows as victims may borrow, so a lender's guarantee can always be reclaimed (design §16.2)."""
    return task.type == BATCH and task.preemptible


def cards(hundredths: int | float) -> str:
    """`hundredths` as cards, the way messages and pages show them: `4`, `0.25`."""
    if hundredths == math.inf:
        return "∞"
    return f"{hundredths / CARD:.2f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class TypeQuota:
    """A tenant's quota row for one GPU type, in hundredths (None: no limit)."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class Admission:
    """The verdict on one task: `refusal` (the QuotaExceeded line) or admitted, `borrowed` beyond nominal."""

    refusal: str | None = None
    borrowed: bool = False


ADMITTED = Admission()


@dataclass
class QuotaBook:
    # tenant → `gpu_quota` (total hard cap over every type) in hundredths; tenants without one are absent.
    caps: dict[int, int] = field(default_factory=dict)
    # tenant → gpu type → its row; tenants without rows are absent (only `caps` applies to them).
    nominal: dict[int, dict[str, TypeQuota]] = field(default_factory=dict)
    # tenant → its cohort; cohort → its tenants.
    cohort_of: dict[int, int] = field(default_factory=dict)
    members: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # (tenant, gpu type) → hundredths its active tasks hold; and of those, what tasks admitted by borrowing hold.
    used: dict[tuple[int, str], int] = field(default_factory=dict)
    borrowed_used: dict[tuple[int, str], int] = field(default_factory=dict)
    # tenant → hundredths over every type (kept by `add_usage`: the total cap is checked for every task).
    total: dict[int, int] = field(default_factory=dict)
    # gpu type → the largest card memory of that type in the cluster ("" → of any type): the PreFilter's estimate of
    # a fractional task's share before its card is chosen (bind counts the real card's).
    largest_card_mb: dict[str, int] = field(default_factory=dict)
    # What `record_bind` booked per task, so `forget_bind` takes back exactly that.
    _booked: dict[int, tuple[str, int, bool]] = field(default_factory=dict, repr=False)

    def add_usage(self, tenant_id: int, gpu_type: str, borrowed: bool, hundredths: int) -> None:
        key = (tenant_id, gpu_type)
        self.used[key] = self.used.get(key, 0) + hundredths
        self.total[tenant_id] = self.total.get(tenant_id, 0) + hundredths
        if borrowed:
            self.borrowed_used[key] = self.borrowed_used.get(key, 0) + hundredths

    def total_used(self, tenant_id: int) -> int:
        return self.total.get(tenant_id, 0)

    def type_used(self, tenant_id: int, gpu_type: str) -> int:
        return self.used.get((tenant_id, gpu_type), 0)

    def nominal_of(self, tenant_id: int, gpu_type: str) -> int:
        row = self.nominal.get(tenant_id, {}).get(gpu_type)
        return row.nominal if row else 0

    def over_nominal(self, tenant_id: int, gpu_type: str) -> int:
        """What the tenant borrows of `gpu_type` now: its use beyond its nominal (0 for tenants without rows)."""
        if tenant_id not in self.nominal:
            return 0
        return max(0, self.type_used(tenant_id, gpu_type) - self.nominal_of(tenant_id, gpu_type))

    def lendable(self, gpu_type: str, *, borrower: int) -> int:
        """What the borrower's cohort lends it of `gpu_type` in all (what it borrows now included): each other
        member's unused nominal up to its lending limit, less what the other members borrow. Members without quota rows neither lend nor
        borrow."""
        cohort = self.cohort_of.get(borrower)
        if cohort is None:
            return 0
        available = 0
        for member in self.members.get(cohort, ()):
            if member == borrower or member not in self.nominal:
                continue
            row = self.nominal[member].get(gpu_type)
            unused = max(0, (row.nominal if row else 0) - self.type_used(member, gpu_type))
            lend = unused if row is None or row.lending_limit is None else min(unused, row.lending_limit)
            available += lend - self.over_nominal(member, gpu_type)
        return available

    def admit(self, task: TaskInfo, *, gpu_type: str, share: int) -> Admission:
        """design §16.2: within the total cap, then within the type's nominal, else by borrowing (preemptible batch
        tasks only) within the borrowing limit and what the cohort has to lend. `gpu_type` "" (not known before
        the cards are chosen) checks the total cap only."""
        tenant_id = task.tenant_id
        if share <= 0:
            return ADMITTED
        cap = self.caps.get(tenant_id)
        if cap is not None:
            used = self.total_used(tenant_id)
            if used + share > cap:
                return Admission(f"quota exceeded: used {cards(used)} / quota {cards(cap)}, asked {cards(share)}")
        if tenant_id not in self.nominal or not gpu_type:
            return ADMITTED
        used, nominal = self.type_used(tenant_id, gpu_type), self.nominal_of(tenant_id, gpu_type)
        if used + share <= nominal:
            return ADMITTED
        line = f"quota exceeded for {gpu_type}: used {cards(used)} / nominal {cards(nominal)}, asked {cards(share)}"
        if not may_borrow(task):
            return Admission(f"{line}; only preemptible batch tasks may borrow")
        borrowing = used + share - nominal
        row = self.nominal[tenant_id].get(gpu_type)
        if row is not None and row.borrowing_limit is not None and borrowing > row.borrowing_limit:
            return Admission(f"{line}; borrowing limit {cards(row.borrowing_limit)}")
        if tenant_id not in self.cohort_of:
            # Nobody lends to a tenant outside a cohort: the cure is a nominal quota for the type, or a cohort.
            missing = f"it has no {gpu_type} quota row and " if row is None else ""
            return Admission(f"{line}; {missing}it is in no cohort, so it cannot borrow")
        lendable = self.lendable(gpu_type, borrower=tenant_id)
        if borrowing > lendable:
            left = max(lendable - self.over_nominal(tenant_id, gpu_type), 0)
            return Admission(f"{line}; the cohort has {cards(left)} to lend")
        return Admission(borrowed=True)

    def estimated_share(self, task: TaskInfo) -> int:
        return card_share(task, self.largest_card_mb.get(task.gpu_type, 0))

    def record_bind(self, task: TaskInfo, *, gpu_type: str, share: int, borrowed: bool = False) -> None:
        self._booked[task.id] = (gpu_type, share, borrowed)
        self.add_usage(task.tenant_id, gpu_type, borrowed, share)

    def is_borrowing(self, task_id: int) -> bool:
        """Whether the task `record_bind` booked was admitted by borrowing."""
        booked = self._booked.get(task_id)
        return booked is not None and booked[2]

    def forget_bind(self, task: TaskInfo) -> None:
        """Take back a `record_bind` whose bind did not happen (or whose task left)."""
        booked = self._booked.pop(task.id, None)
        if booked is not None:
            gpu_type, share, borrowed = booked
            self.add_usage(task.tenant_id, gpu_type, borrowed, -share)

    def reclaim_lenders(self, task: TaskInfo) -> frozenset[int] | None:
        """design §16.2: when `task` fits within its tenant's own nominal quota of its type, the other tenants of
        its cohort whose borrowed work of that type a reclaim may evict for it; else None."""
        tenant_id, gpu_type = task.tenant_id, task.gpu_type
        cohort = self.cohort_of.get(tenant_id)
        if cohort is None or not gpu_type or tenant_id not in self.nominal:
            return None
        if self.type_used(tenant_id, gpu_type) + self.estimated_share(task) > self.nominal_of(tenant_id, gpu_type):
            return None
        borrowers = frozenset(member for member in self.members.get(cohort, ())
                              if member != tenant_id and self.borrowed_used.get((member, gpu_type), 0) > 0)
        return borrowers or None

    def dominant_share(self, tenant_id: int) -> float:
        """design §16.2: used ÷ nominal per type, the maximum over types (a type used without nominal: infinite); a
        tenant without quota rows counts as 1."""
        rows = self.nominal.get(tenant_id)
        if not rows:
            return 1.0
        share = 0.0
        for (tenant, gpu_type), used in self.used.items():
            if tenant != tenant_id or used <= 0:
                continue
            nominal = self.nominal_of(tenant_id, gpu_type)
            share = max(share, used / nominal if nominal else math.inf)
        return share
