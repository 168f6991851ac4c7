from django.db import migrations

# fgd's stored settings become the ones the trace replay measured best (design §15.9), so that an admin who enables
# fgd gets them and sees them on the plugin page. Copied here, not imported: a migration keeps the values of its day.
# A row whose settings an admin already chose is left as it is.
DEFAULTS = {"tie_break": "best-fit", "cpu_weight": 1}


def store_fgd_defaults(apps, schema_editor):
    apps.get_model("scheduling", "PluginConfig").objects.filter(name="fgd", extra={}).update(extra=DEFAULTS)


def forget_fgd_defaults(apps, schema_editor):
    apps.get_model("scheduling", "PluginConfig").objects.filter(name="fgd", extra=DEFAULTS).update(extra={})


class Migration(migrations.Migration):

    dependencies = [
        ("plugins_admin", "0004_merge_fgd_row_and_config_move"),
    ]

    operations = [
        migrations.RunPython(store_fgd_defaults, forget_fgd_defaults),
    ]
