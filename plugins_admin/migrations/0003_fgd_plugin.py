from django.db import migrations

# The fgd layout scorer's row (design §15.9), off by default: spread stays the default layout policy.
FGD = ("fgd", False, 0, {})


def create_fgd_row(apps, schema_editor):
    name, enabled, weight, extra = FGD
    apps.get_model("plugins_admin", "PluginConfig").objects.bulk_create(
        [apps.get_model("plugins_admin", "PluginConfig")(name=name, enabled=enabled, weight=weight, extra=extra)],
        ignore_conflicts=True,
    )


def remove_fgd_row(apps, schema_editor):
    apps.get_model("plugins_admin", "PluginConfig").objects.filter(name=FGD[0]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("plugins_admin", "0002_default_plugin_set"),
    ]

    operations = [
        migrations.RunPython(create_fgd_row, remove_fgd_row),
    ]
