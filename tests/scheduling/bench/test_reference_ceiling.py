"""The issues' reference ceiling, kept in the repository, runs against a scratch database and leaves nothing there."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

SCRIPT = Path(__file__).resolve().parents[3] / "scheduling" / "bench" / "reference_ceiling.py"


@pytest.mark.django_db(transaction=True)
def test_the_reference_ceiling_prints_its_figure_and_drops_its_tables():
    settings = connection.settings_dict
    password = f":{settings['PASSWORD']}" if settings["PASSWORD"] else ""
    url = (f"postgresql://{settings['USER']}{password}@{settings['HOST'] or '127.0.0.1'}:{settings['PORT'] or 5432}/"
           f"{settings['NAME']}")
    run = subprocess.run([sys.executable, str(SCRIPT), "50"], env={**os.environ, "DATABASE_URL": url},
                         capture_output=True, text=True, timeout=120)

    assert run.returncode == 0, run.stderr
    assert re.fullmatch(r"bind_ceiling_per_s=\d+\n", run.stdout)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'ceil\\_%'")
        assert cursor.fetchone()[0] == 0
