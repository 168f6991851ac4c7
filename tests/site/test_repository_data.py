"""A clone tests, benchmarks and replays on its own: nothing reaches outside the repository for data."""

import csv
import os
import re
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from scheduling.management.commands import bench_scheduler
from tests.shared_data import OPENB_TRACE, REPOSITORY, TOPOLOGY_CAPTURES

# A path into the working folder beside the checkout, spelled the ways Python code would spell it.
OUTSIDE_REFERENCE = re.compile(r"""\.\./shared|["']shared["']\s*/|/\s*["']shared["']|HETEROFLOW_SHARED_DIR""")


def test_data_folders_live_inside_the_repository():
    assert REPOSITORY == Path(settings.BASE_DIR)
    for folder in (TOPOLOGY_CAPTURES, OPENB_TRACE, bench_scheduler.OPENB_DIR):
        assert folder.resolve().is_relative_to(REPOSITORY), folder
        assert folder.is_dir(), folder


def test_the_openb_trace_keeps_its_upstream_files_whole():
    expected_rows = {
        "openb_node_list_gpu_node.csv": 1213, "openb_pod_list_default.csv": 8152,
        "openb_pod_list_gpushare40.csv": 8152, "openb_pod_list_multigpu20.csv": 8324,
        "openb_pod_list_gpuspec33.csv": 8152,
    }
    for name, rows in expected_rows.items():
        with open(OPENB_TRACE / name, newline="") as handle:
            assert sum(1 for _ in csv.DictReader(handle)) == rows, name
    assert "research or study" in (OPENB_TRACE / "README.md").read_text()


def test_no_source_file_reads_the_shared_folder_beside_the_checkout():
    offenders = [
        str(path.relative_to(REPOSITORY))
        for path in REPOSITORY.rglob("*.py")
        if not path.is_relative_to(REPOSITORY / ".venv") and path != Path(__file__)
        and OUTSIDE_REFERENCE.search(path.read_text(errors="replace"))
    ]
    assert offenders == []


def test_the_benchmark_finds_the_trace_without_loading_settings():
    # Its scheduler processes import the module before they point DATABASE_URL at the benchmark's database:
    # settings loaded at import would keep them on the default database.
    probe = ("import scheduling.management.commands.bench_scheduler as bench; from django.conf import settings;"
             "assert not settings.configured; print(bench.OPENB_DIR)")
    run = subprocess.run([sys.executable, "-c", probe], cwd=REPOSITORY, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "heteroflow_site.settings"})
    assert run.returncode == 0, run.stderr
    assert Path(run.stdout.strip()) == OPENB_TRACE
