from django.db import migrations


class Migration(migrations.Migration):
    """Joins the fgd row (0003_fgd_plugin, which reads PluginConfig where it still lived) with the move of
    PluginConfig's state to the scheduling app (0003_config_now_in_scheduling)."""

    dependencies = [
        ("plugins_admin", "0003_config_now_in_scheduling"),
        ("plugins_admin", "0003_fgd_plugin"),
    ]

    operations = []
