"""PluginConfig now belongs to the scheduling app (same table); this app only forgets it."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("plugins_admin", "0002_default_plugin_set"),
        ("scheduling", "0005_plugin_config_from_plugins_admin"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="PluginConfig")]),
    ]
