from django.db import migrations

# design §6 defaults, frozen here: a migration must not follow later code changes.
DEFAULT_PLUGINS = [
    ("resource-filter", True, 1, {}),
    ("gpu-filter", True, 1, {}),
    ("spread", True, 1, {}),
    ("binpack", False, 0, {}),
    ("nvlink", True, 1, {}),
    ("topology", True, 1, {}),
    ("rdma", True, 1, {}),
    ("preempt", True, 0, {"preempt_stage": "running"}),
]
ALL_TASK_EVENTS = ["failed", "preempted", "succeeded"]


def create_defaults(apps, schema_editor):
    PluginConfig = apps.get_model("plugins_admin", "PluginConfig")
    NotificationChannel = apps.get_model("plugins_admin", "NotificationChannel")
    PluginConfig.objects.bulk_create(
        [PluginConfig(name=name, enabled=enabled, weight=weight, extra=extra)
         for name, enabled, weight, extra in DEFAULT_PLUGINS],
        ignore_conflicts=True,
    )
    NotificationChannel.objects.bulk_create(
        [NotificationChannel(kind=kind, enabled=False, target="", events=ALL_TASK_EVENTS)
         for kind in ("webhook", "email")],
        ignore_conflicts=True,
    )


def remove_defaults(apps, schema_editor):
    apps.get_model("plugins_admin", "PluginConfig").objects.filter(
        name__in=[name for name, *_ in DEFAULT_PLUGINS]).delete()
    apps.get_model("plugins_admin", "NotificationChannel").objects.filter(kind__in=["webhook", "email"]).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("plugins_admin", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(create_defaults, remove_defaults),
    ]
