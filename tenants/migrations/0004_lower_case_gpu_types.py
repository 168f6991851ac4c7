"""Per-type quotas name their GPU type lower case, as requests are normalised where they enter
(`nodes.gpu_type_input`). A tenant with rows for two spellings of one type (the unique `(tenant, gpu_type)` allows
`NVIDIA` beside `nvidia`) keeps one: the lower-case row, which the quota API and page wrote, or else the newest."""

from django.db import migrations
from django.db.models.functions import Lower, Trim


def lower_case_quota_types(apps, schema_editor):
    quota = apps.get_model("tenants", "TenantGpuQuota")
    for row in quota.objects.exclude(gpu_type=Lower(Trim("gpu_type"))).order_by("-id"):
        lowered = row.gpu_type.strip().lower()
        if quota.objects.filter(tenant_id=row.tenant_id, gpu_type=lowered).exists():
            row.delete()
        else:
            quota.objects.filter(id=row.id).update(gpu_type=lowered)


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0003_drop_plaintext_authtoken"),
    ]

    operations = [
        migrations.RunPython(lower_case_quota_types, migrations.RunPython.noop),
    ]
