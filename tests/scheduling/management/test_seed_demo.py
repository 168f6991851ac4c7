import pytest
from django.core.management import call_command

from nodes.models import GPU_TYPES, GPU, Node
from scheduling.models import Task
from tenants.models import ShareGroup, Tenant


@pytest.mark.django_db
def test_seed_demo_builds_a_ten_architecture_cluster_and_is_idempotent(capsys):
    call_command("seed_demo", force=True)
    first = (Node.objects.count(), GPU.objects.count(), Task.objects.count(), Tenant.objects.count())
    call_command("seed_demo", force=True)

    assert (Node.objects.count(), GPU.objects.count(), Task.objects.count(), Tenant.objects.count()) == first
    assert 35 <= first[0] <= 45
    assert set(Node.objects.values_list("gpu_type", flat=True)) == set(GPU_TYPES)
    assert all(node.gpu_total == node.gpus.count() for node in Node.objects.all())
    assert Node.objects.filter(labels__has_key="heteroflow.io/gpu-topology").exists()
    assert Node.objects.filter(labels__rdma="true").exists()
    assert ShareGroup.objects.get().tenants.count() == 2
    assert "admin" in capsys.readouterr().out


@pytest.mark.django_db
def test_demo_workload_submits_valid_tasks_through_the_service():
    call_command("seed_demo", force=True)
    before = Task.objects.count()

    call_command("demo_workload", count=5, interval=0, seed=7)

    assert Task.objects.count() == before + 5
    assert not Task.objects.filter(type="training", preemptible=True).exists()
