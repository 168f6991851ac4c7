import re

import pytest

from tests.processes import run_benchmark, throwaway_databases_left


@pytest.mark.django_db
def test_bench_what_if_prints_cycle_times_alone_and_beside_previews_and_drops_its_database():
    output = run_benchmark("bench_what_if", "--nodes", "10", "--pending", "40", "--cycles", "1")
    assert re.search(r"^cycle_ms alone: p50=[\d.]+ p90=[\d.]+ \(n=1\)$", output, re.MULTILINE), output
    assert re.search(r"^cycle_ms with what-if: p50=[\d.]+ p90=[\d.]+ \(n=1\)$", output, re.MULTILINE), output
    assert re.search(r"^what_if_slowdown_p50=\d+\.\d{3}$", output, re.MULTILINE), output
    assert throwaway_databases_left(output) == []
