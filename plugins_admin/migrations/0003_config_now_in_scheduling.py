"""PluginConfig now belongs to the scheduling app (same table); this app only forgets it.

Named to sort before sibling 0003 migrations of other branches: when a merge migration joins them, Django applies
the later-sorting sibling first, so data migrations that still read plugins_admin.PluginConfig run before this.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("plugins_admin", "0002_default_plugin_set"),
        ("scheduling", "0005_plugin_config_from_plugins_admin"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="PluginConfig")]),
    ]
