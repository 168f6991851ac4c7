"""API tokens were once DRF's authtoken, stored in plain text; knox replaced it (hashed tokens). A database that
carried the old app still holds its table of usable plaintext tokens: dropped (issue 27 item 10). Nothing reads it;
a fresh database never had it."""

from django.db import migrations

DROP_PLAINTEXT_TOKENS = "DROP TABLE IF EXISTS authtoken_token CASCADE"


class Migration(migrations.Migration):
    dependencies = [("tenants", "0002_cohorts_and_gpu_quotas")]

    operations = [migrations.RunSQL(DROP_PLAINTEXT_TOKENS, reverse_sql=migrations.RunSQL.noop)]
