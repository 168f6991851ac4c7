"""`audit_ledgers`: differences printed, nothing changed without --fix, corrections with an audit row with it."""

import io

import pytest
from django.core.management import call_command

from nodes.models import GPU, NodeAuditEntry
from scheduling.models import Task
from tests.factories import make_node, make_task


def _audit(*args) -> tuple[str, int]:
    out = io.StringIO()
    try:
        call_command("audit_ledgers", *args, stdout=out)
        code = 0
    except SystemExit as exit_:
        code = exit_.code
    return out.getvalue(), code


@pytest.fixture
def drifted(tenant):
    """A node whose stored gpu_used (5) disagrees with its one running 2-card task."""
    node = make_node(cards=8, gpu_used=5, name="drifted")
    make_task(tenant=tenant, node=node, status="running", gpu_required=2, gpus=[0, 1])
    GPU.objects.filter(node=node, index__in=[0, 1]).update(memory_used_mb=4000)
    return node


@pytest.mark.django_db
def test_agreeing_ledgers_print_a_clean_summary(tenant):
    node = make_node(cards=8, gpu_used=2, name="steady")
    make_task(tenant=tenant, node=node, status="running", gpu_required=2, gpus=[0, 1])
    GPU.objects.filter(node=node, index__in=[0, 1]).update(memory_used_mb=4000)
    out, code = _audit()
    assert code == 0
    assert out.strip() == ("1 nodes, 1 tenants audited: 0 wrong gpu_used ledgers, 0 nodes with differences, "
                           "0 tenant-days of usage records that differ from their tasks\n"
                           "6 cards free; 0 quarantined card(s) not counted free")


@pytest.mark.django_db
def test_a_quarantined_card_is_never_counted_free(tenant):
    """design §17.3: a quarantined card no task holds is out of service, not free."""
    from django.utils import timezone

    node = make_node(cards=4, gpu_used=1, name="sick")
    make_task(tenant=tenant, node=node, status="running", gpu_required=1, gpus=[0])
    GPU.objects.filter(node=node, index=0).update(memory_used_mb=4000)
    # Card 0 failed under its task (still stopping), card 3 failed idle.
    GPU.objects.filter(node=node, index__in=[0, 3]).update(quarantined_at=timezone.now(), health="failed")
    out, code = _audit()
    assert code == 0
    assert out.strip().splitlines()[-1] == "2 cards free; 1 quarantined card(s) not counted free"


@pytest.mark.django_db
def test_without_fix_the_difference_is_printed_and_nothing_changes(drifted):
    out, code = _audit()
    assert code == 1
    assert "node drifted: gpu_used stored 5, active tasks hold 2" in out
    assert "run with --fix" in out
    drifted.refresh_from_db()
    assert drifted.gpu_used == 5 and not NodeAuditEntry.objects.exists()


@pytest.mark.django_db
def test_fix_corrects_the_ledger_with_an_audit_row(drifted):
    out, code = _audit("--fix")
    assert code == 0
    assert "fixed node drifted: gpu_used 5 -> 2" in out
    drifted.refresh_from_db()
    assert drifted.gpu_used == 2
    entry = NodeAuditEntry.objects.get()
    assert (entry.node_id, entry.action, entry.before, entry.after) == (
        drifted.id, "ledger.correct", {"gpu_used": 5}, {"gpu_used": 2})
    assert _audit()[1] == 0, "a second audit finds nothing left to fix"


@pytest.mark.django_db
def test_agent_reports_double_bookings_and_quotas_are_compared(tenant):
    tenant.gpu_quota = 1
    tenant.save()
    node = make_node(cards=4, gpu_used=3, name="mixed")
    make_task(tenant=tenant, node=node, status="running", gpu_required=1, gpus=[0])
    make_task(tenant=tenant, node=node, status="scheduled", gpu_required=1, gpus=[0])
    idle = make_task(tenant=tenant, node=node, status="running", gpu_required=1, gpus=[2])
    GPU.objects.filter(node=node, index__in=[0, 3]).update(memory_used_mb=1000)

    out, _ = _audit("--fix")
    assert "node mixed: cards 0 held by several whole-card tasks" in out
    assert "node mixed: agent reports memory in use on cards 3, no active task holds them" in out
    assert f"node mixed: running tasks {idle.id} show no memory in use on their cards" in out
    assert "tenant acme: 3 GPUs in use, quota 1 (over by 2)" in out
    assert Task.objects.filter(status="running").count() == 2, "agent disagreements are reported, not changed"
