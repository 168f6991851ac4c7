"""API tokens carry the name their user gave them, in a table beside knox's, which has no column
for it. Tokens issued before have no name."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knox", "0009_extend_authtoken_field"),
        ("tenants", "0004_lower_case_gpu_types"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiTokenName",
            fields=[
                ("token", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                               related_name="token_name", serialize=False,
                                               to=settings.KNOX_TOKEN_MODEL)),
                ("name", models.CharField(max_length=64)),
            ],
        ),
    ]
