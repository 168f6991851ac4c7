"""The quota book's admission rule (design §16.2), over plain data."""

import math

from scheduling.fair_share.book import QuotaBook, TypeQuota, card_share
from scheduling.framework.snapshot import TaskInfo

A, B, C = 1, 2, 3


def _book(*, cohort=True, **rows) -> QuotaBook:
    book = QuotaBook(nominal={tenant: {"nvidia": row} for tenant, row in
                              ((A, rows.get("a", TypeQuota(400))), (B, rows.get("b", TypeQuota(400))))})
    if cohort:
        book.cohort_of = {A: 7, B: 7}
        book.members = {7: (A, B)}
    return book


def _task(tenant=A, *, preemptible=True, type="batch", gpu_required=1, **fields) -> TaskInfo:
    return TaskInfo(id=fields.pop("id", 1), tenant_id=tenant, type=type, gpu_type="nvidia", gpu_required=gpu_required,
                    preemptible=preemptible, **fields)


def _fill(book, tenant, cards):
    """Admit and book `cards` one-card tasks of `tenant`; how many were admitted, how many of them borrowed."""
    admitted = borrowed = 0
    for number in range(cards):
        task = _task(tenant, id=1000 * tenant + number)
        admission = book.admit(task, gpu_type="nvidia", share=100)
        if admission.refusal is None:
            book.record_bind(task, gpu_type="nvidia", share=100, borrowed=admission.borrowed)
            admitted += 1
            borrowed += admission.borrowed
    return admitted, borrowed


def test_a_tenant_alone_in_a_cohort_borrows_the_other_tenants_unused_nominal():
    assert _fill(_book(), A, 10) == (8, 4)


def test_without_a_cohort_a_tenant_gets_its_nominal_only():
    book = _book(cohort=False)
    assert _fill(book, A, 10) == (4, 0)
    refusal = book.admit(_task(), gpu_type="nvidia", share=100).refusal
    assert refusal == "quota exceeded for nvidia: used 4 / nominal 4, asked 1; it is in no cohort, so it cannot borrow"


def test_outside_a_cohort_a_type_without_a_row_is_named_as_the_cause():
    book = _book(cohort=False)
    task = TaskInfo(id=1, tenant_id=A, type="batch", gpu_type="metax", gpu_required=1, preemptible=True)
    refusal = book.admit(task, gpu_type="metax", share=100).refusal
    assert refusal == ("quota exceeded for metax: used 0 / nominal 0, asked 1; it has no metax quota row and it is "
                       "in no cohort, so it cannot borrow")


def test_only_preemptible_batch_tasks_borrow():
    book = _book()
    _fill(book, A, 4)
    for task in (_task(preemptible=False), _task(type="training", preemptible=False),
                 _task(type="inference", preemptible=True)):
        assert book.admit(task, gpu_type="nvidia", share=100).refusal.endswith(
            "only preemptible batch tasks may borrow")


def test_what_the_lender_uses_is_not_lent_and_what_others_borrow_is_gone():
    book = _book()
    _fill(book, B, 1)
    assert _fill(book, A, 10) == (7, 3)
    # B's own tasks still fit within B's nominal, whatever A borrows: that is what reclaim is for.
    assert book.admit(_task(B, preemptible=False), gpu_type="nvidia", share=100).refusal is None


def test_borrowing_and_lending_limits():
    assert _fill(_book(a=TypeQuota(400, borrowing_limit=100)), A, 10) == (5, 1)
    assert _fill(_book(b=TypeQuota(400, lending_limit=250)), A, 10) == (6, 2)


def test_the_total_cap_applies_before_nominal_quotas():
    book = _book()
    book.caps = {A: 500}
    assert _fill(book, A, 10) == (5, 1)


def test_a_type_without_a_row_may_only_be_borrowed():
    book = _book()
    book.nominal[A] = {"ascend": TypeQuota(400)}
    assert _fill(book, A, 10) == (4, 4)


def test_a_tenant_without_rows_has_only_its_total_cap():
    book = QuotaBook(caps={C: 200})
    task = TaskInfo(id=1, tenant_id=C, gpu_type="nvidia", gpu_required=3)
    assert book.admit(task, gpu_type="nvidia", share=300).refusal == "quota exceeded: used 0 / quota 2, asked 3"
    assert book.admit(task, gpu_type="nvidia", share=200).refusal is None


def test_forget_bind_takes_back_exactly_what_was_booked():
    book = _book()
    _fill(book, A, 6)
    task = _task(id=99)
    book.record_bind(task, gpu_type="nvidia", share=100, borrowed=True)
    book.forget_bind(task)
    assert book.type_used(A, "nvidia") == 600 and book.borrowed_used[(A, "nvidia")] == 200


def test_fractional_tasks_count_their_share_of_the_card():
    shard = TaskInfo(id=1, tenant_id=A, gpu_memory_mb=20480)
    assert card_share(shard, 81920) == 25
    assert card_share(TaskInfo(id=1, tenant_id=A, gpu_memory_mb=1), 81920) == 1
    assert card_share(shard, 0) == 100
    assert card_share(TaskInfo(id=1, tenant_id=A, gpu_required=3), 81920) == 300


def test_dominant_share_is_the_largest_used_over_nominal():
    book = _book()
    book.nominal[A]["ascend"] = TypeQuota(200)
    book.add_usage(A, "nvidia", False, 100)
    book.add_usage(A, "ascend", False, 100)
    assert book.dominant_share(A) == 0.5
    book.add_usage(A, "musa", True, 10)
    assert book.dominant_share(A) == math.inf
    assert book.dominant_share(C) == 1.0
