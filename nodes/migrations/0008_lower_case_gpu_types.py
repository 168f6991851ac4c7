"""GPU types are stored lower case (requests are normalised where they enter, `nodes.gpu_type_input`), so the
scheduler compares them as they are. A card stored under two spellings of its type on one node (the unique
`(node, type, index)` allows `NVIDIA 0` beside `nvidia 0`) keeps one row: the lower-case one, which the agent's next
heartbeat updates, or else the newest."""

from django.db import migrations
from django.db.models.functions import Lower, Trim


def _lower_case(model, field: str, key: tuple[str, ...] = ()) -> None:
    """`field` lower-cased in every row; with `key`, a row whose lower-cased value another row with the same key
    already has is deleted instead."""
    stray = model.objects.exclude(**{field: Lower(Trim(field))})
    if not key:
        stray.update(**{field: Lower(Trim(field))})
        return
    for row in stray.order_by("-id"):
        lowered = getattr(row, field).strip().lower()
        same_key = {name: getattr(row, name) for name in key}
        if model.objects.filter(**same_key, **{field: lowered}).exists():
            row.delete()
        else:
            model.objects.filter(id=row.id).update(**{field: lowered})


def lower_case_gpu_types(apps, schema_editor):
    _lower_case(apps.get_model("nodes", "Node"), "gpu_type")
    _lower_case(apps.get_model("nodes", "GPU"), "type", key=("node_id", "index"))
    _lower_case(apps.get_model("nodes", "CardHealthEvent"), "card_type")


class Migration(migrations.Migration):

    dependencies = [
        ("nodes", "0007_card_health_and_drain"),
    ]

    operations = [
        migrations.RunPython(lower_case_gpu_types, migrations.RunPython.noop),
    ]
