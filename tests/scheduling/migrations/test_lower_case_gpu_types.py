"""scheduling 0022: task, group and usage types lower-cased; usage of two spellings of one type is added up."""

from datetime import date
from importlib import import_module

import pytest
from django.apps import apps

from scheduling.models import Task, TaskGroup, UsageRecord
from tests.factories import make_task

pytestmark = pytest.mark.django_db

migration = import_module("scheduling.migrations.0023_lower_case_gpu_types")


def test_tasks_and_groups_are_lower_cased(tenant):
    group = TaskGroup.objects.create(tenant=tenant, name="g", type="training", world_size=1, gpus_per_worker=1,
                                     gpu_type="nvidia")
    TaskGroup.objects.filter(id=group.id).update(gpu_type="NVIDIA")
    task = make_task(tenant=tenant, gpu_required=1)
    Task.objects.filter(id=task.id).update(gpu_type="Ascend ", card_type="ASCEND")

    migration.lower_case_gpu_types(apps, None)

    assert TaskGroup.objects.get().gpu_type == "nvidia"
    assert Task.objects.values_list("gpu_type", "card_type").get() == ("ascend", "ascend")


def test_usage_of_two_spellings_of_a_type_is_added_into_one_record(tenant, other_tenant):
    day = date(2026, 12, 1)
    UsageRecord.objects.create(tenant=tenant, day=day, gpu_type="nvidia", task_type="batch", card_seconds=10)
    UsageRecord.objects.create(tenant=tenant, day=day, gpu_type="NVIDIA", task_type="batch", card_seconds=5)
    UsageRecord.objects.create(tenant=tenant, day=day, gpu_type="Nvidia", task_type="batch", card_seconds=1)
    UsageRecord.objects.create(tenant=tenant, day=day, gpu_type="NVIDIA", task_type="training", card_seconds=7)
    UsageRecord.objects.create(tenant=other_tenant, day=day, gpu_type="Ascend", task_type="batch", card_seconds=3)

    migration.lower_case_gpu_types(apps, None)

    assert sorted(UsageRecord.objects.values_list("tenant_id", "gpu_type", "task_type", "card_seconds")) == sorted([
        (tenant.id, "nvidia", "batch", 16.0), (tenant.id, "nvidia", "training", 7.0),
        (other_tenant.id, "ascend", "batch", 3.0)])
