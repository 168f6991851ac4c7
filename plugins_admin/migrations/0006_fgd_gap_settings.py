from django.db import migrations

# fgd's measured best settings gained the card-gap look-ahead (gap_weight, gap_horizon; design §15.9): a row still on
# 0005's defaults moves to the new ones, an admin's own choice is left as it is. Values copied, not imported.
BEFORE = {"tie_break": "best-fit", "cpu_weight": 1}
DEFAULTS = {"tie_break": "best-fit", "cpu_weight": 1, "gap_weight": 3, "gap_horizon": 50}


def store_gap_defaults(apps, schema_editor):
    apps.get_model("scheduling", "PluginConfig").objects.filter(name="fgd", extra=BEFORE).update(extra=DEFAULTS)


def forget_gap_defaults(apps, schema_editor):
    apps.get_model("scheduling", "PluginConfig").objects.filter(name="fgd", extra=DEFAULTS).update(extra=BEFORE)


class Migration(migrations.Migration):

    dependencies = [
        ("plugins_admin", "0005_fgd_default_settings"),
    ]

    operations = [
        migrations.RunPython(store_gap_defaults, forget_gap_defaults),
    ]
