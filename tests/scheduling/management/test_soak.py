"""`manage.py soak` for one minute with every fault kind: the real processes, the faults, the checker, the report."""

import json
import re

import pytest

from scheduling.soak.faults import KINDS
from tests.processes import run_benchmark


@pytest.mark.django_db
def test_a_one_minute_soak_injects_every_fault_and_finds_nothing_lost_or_doubled(tmp_path):
    output = run_benchmark("soak", "--minutes", "1", "--nodes", "6", "--tenants", "2", "--rate", "1",
                           "--faults", "all", "--report", str(tmp_path))

    last_line = output.strip().splitlines()[-1]
    assert re.search(rf"^soak: tasks=[1-9]\d* faults={len(KINDS)} violations=0$", last_line), output
    report = json.loads((tmp_path / "report.json").read_text())
    assert {fault["kind"] for fault in report["faults"]} == set(KINDS)
    assert all(fault["recovery_seconds"] is not None for fault in report["faults"])
    assert report["bound"] > 0 and report["finished"] > 0
    assert (tmp_path / "timeline.svg").read_text().startswith("<svg")
    assert "| scheduler | 1 |" in (tmp_path / "report.md").read_text()


def test_unknown_fault_kinds_are_refused_naming_them():
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=r"--faults: unknown kinds \['meteor'\]"):
        call_command("soak", "--faults", "redis,meteor")
