from django.db import migrations, models


def compact_listed_nodes(apps, schema_editor):
    """Attempts written before: a list of `{node, reason, scores, total}` becomes names grouped by reason plus
    the scored rows."""
    SchedulingAttempt = apps.get_model("scheduling", "SchedulingAttempt")
    attempts = SchedulingAttempt.objects.extra(where=["jsonb_typeof(nodes) = 'array'"]).only("id", "nodes")
    for attempt in attempts.iterator(chunk_size=500):
        filtered: dict[str, list[str]] = {}
        scored = [entry for entry in attempt.nodes if not entry.get("reason")]
        for entry in attempt.nodes:
            if entry.get("reason"):
                filtered.setdefault(entry["reason"], []).append(entry.get("node"))
        plugins = sorted({plugin for entry in scored for plugin in (entry.get("scores") or {})})
        rows = [[entry.get("node"), entry.get("total"),
                 *((entry.get("scores") or {}).get(plugin) for plugin in plugins)] for entry in scored]
        attempt.nodes = {"filtered": filtered, "plugins": plugins, "scored": rows} if attempt.nodes else {}
        attempt.save(update_fields=["nodes"])


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0003_task_status_index_in_queue_order'),
    ]

    operations = [
        migrations.AlterField(
            model_name='schedulingattempt',
            name='nodes',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(compact_listed_nodes, migrations.RunPython.noop),
    ]
