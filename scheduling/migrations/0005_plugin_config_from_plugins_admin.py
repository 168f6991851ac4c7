"""The scheduler's plugin set is read by the scheduling app, so its model moves here; the table stays."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("scheduling", "0004_compact_attempt_nodes"),
        ("plugins_admin", "0002_default_plugin_set"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="PluginConfig",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("name", models.CharField(max_length=64, unique=True)),
                        ("enabled", models.BooleanField(default=True)),
                        ("weight", models.PositiveIntegerField(default=1)),
                        ("extra", models.JSONField(blank=True, default=dict)),
                        ("updated_at", models.DateTimeField(auto_now=True)),
                    ],
                    options={"db_table": "plugins_admin_pluginconfig", "ordering": ["name"]},
                ),
            ],
        ),
    ]
