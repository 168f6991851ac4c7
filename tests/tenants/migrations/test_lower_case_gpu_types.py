"""tenants 0004: quota types lower-cased; a tenant with two spellings of one type keeps one row."""

from decimal import Decimal
from importlib import import_module

import pytest
from django.apps import apps

from tenants.models import TenantGpuQuota

pytestmark = pytest.mark.django_db

migration = import_module("tenants.migrations.0004_lower_case_gpu_types")


def test_quota_types_are_lower_cased_keeping_the_lower_case_row_or_the_newest(tenant, other_tenant):
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=4)
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="NVIDIA", nominal=9)
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="Ascend", nominal=1)
    TenantGpuQuota.objects.create(tenant=other_tenant, gpu_type="Musa", nominal=2)
    TenantGpuQuota.objects.create(tenant=other_tenant, gpu_type="MUSA", nominal=3)

    migration.lower_case_quota_types(apps, None)

    assert sorted(TenantGpuQuota.objects.values_list("tenant_id", "gpu_type", "nominal")) == sorted([
        (tenant.id, "nvidia", Decimal(4)), (tenant.id, "ascend", Decimal(1)),
        (other_tenant.id, "musa", Decimal(3))])
