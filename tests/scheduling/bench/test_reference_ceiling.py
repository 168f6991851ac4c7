"""The issues' reference ceiling, kept in the repository, runs against a scratch database and leaves nothing there."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from scheduling.bench.database import database_url

SCRIPT = Path(__file__).resolve().parents[3] / "scheduling" / "bench" / "reference_ceiling.py"


@pytest.mark.django_db(transaction=True)
def test_the_reference_ceiling_prints_its_figure_and_drops_its_tables():
    # As the benchmarks pass it on: the embedded server's URL names a socket folder, not a host and port.
    url = database_url(connection.settings_dict["NAME"])
    run = subprocess.run([sys.executable, str(SCRIPT), "50"], env={**os.environ, "DATABASE_URL": url},
                         capture_output=True, text=True, timeout=120)

    assert run.returncode == 0, run.stderr
    assert re.fullmatch(r"bind_ceiling_per_s=\d+\n", run.stdout)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'ceil\\_%'")
        assert cursor.fetchone()[0] == 0
