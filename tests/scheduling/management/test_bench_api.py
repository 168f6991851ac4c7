import re

import pytest

from tests.processes import run_benchmark, throwaway_databases_left


@pytest.mark.django_db
def test_bench_api_runs_the_load_once_per_count_of_web_processes():
    output = run_benchmark("bench_api", "--nodes", "10", "--pending", "20", "--clients", "2", "--requests", "6",
                           "--seconds", "20", "--phases", "idle", "--web-processes", "1,2")

    assert re.findall(r"^database \S+: 10 nodes, 20 pending tasks, 2 clients, (\d) web process", output,
                      re.MULTILINE) == ["1", "2"], output
    assert re.findall(r"^web_processes=(\d)$", output, re.MULTILINE) == ["1", "2"], output
    for kind in ("submit", "list", "page"):
        runs = re.findall(rf"^idle {kind} n=(\d+) p50_ms=[\d.]+ p99_ms=[\d.]+ max_ms=[\d.]+ errors=(\d+)$", output,
                          re.MULTILINE)
        assert len(runs) == 2 and all(int(count) > 0 and errors == "0" for count, errors in runs), output
    assert throwaway_databases_left(output) == []
