"""Tasks, groups and usage records name their GPU type lower case, as requests are normalised where they enter
(`nodes.gpu_type_input`). Usage records of two spellings of one type on the same tenant, day and task type (the
unique `usage_record_key` allows both) are added into the lower-case one, so no card-second is lost."""

from django.db import migrations
from django.db.models import F
from django.db.models.functions import Lower, Trim


def lower_case_gpu_types(apps, schema_editor):
    for model_name, fields in (("Task", ("gpu_type", "card_type")), ("TaskGroup", ("gpu_type",))):
        model = apps.get_model("scheduling", model_name)
        for field in fields:
            model.objects.exclude(**{field: Lower(Trim(field))}).update(**{field: Lower(Trim(field))})
    usage = apps.get_model("scheduling", "UsageRecord")
    for row in usage.objects.exclude(gpu_type=Lower(Trim("gpu_type"))).order_by("id"):
        lowered = row.gpu_type.strip().lower()
        merged = usage.objects.filter(tenant_id=row.tenant_id, day=row.day, task_type=row.task_type,
                                      gpu_type=lowered).update(card_seconds=F("card_seconds") + row.card_seconds)
        if merged:
            row.delete()
        else:
            usage.objects.filter(id=row.id).update(gpu_type=lowered)


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0022_cluster_history_samples"),
    ]

    operations = [
        migrations.RunPython(lower_case_gpu_types, migrations.RunPython.noop),
    ]
