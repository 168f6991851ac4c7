"""`manage.py replay_trace` (SPEC §15.9) on a small trace cut from openb, written to a temporary directory."""

import csv
import json
import re
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

TRACE = Path(__file__).resolve().parents[3] / "data" / "traces" / "openb"


def cut(source: Path, target: Path, every: int) -> Path:
    with source.open(newline="") as handle:
        rows = list(csv.reader(handle))
    with target.open("w", newline="") as handle:
        csv.writer(handle).writerows([rows[0], *rows[1::every]])
    return target


@pytest.fixture
def small_trace(tmp_path):
    return (cut(TRACE / "openb_node_list_gpu_node.csv", tmp_path / "nodes.csv", 30),
            cut(TRACE / "openb_pod_list_default.csv", tmp_path / "pods.csv", 10))


def replay(*args: str) -> str:
    out = StringIO()
    call_command("replay_trace", *args, stdout=out)
    return out.getvalue()


def test_prints_each_seed_and_the_mean_and_ends_with_the_fixed_line(small_trace, tmp_path):
    nodes, pods = small_trace
    output = replay("--nodes", str(nodes), "--pods", str(pods), "--policy", "binpack,fgd", "--seeds", "2", "--jobs", "1",
                    "--json", str(tmp_path / "out.json"), "--svg", str(tmp_path / "out.svg"))
    report = json.loads((tmp_path / "out.json").read_text())
    means = {name: report["policies"][name]["allocation_at_arrival"]["mean"] for name in ("binpack", "fgd")}
    last = output.strip().splitlines()[-1]
    assert last == f"allocation_at_arrival=binpack:{means['binpack']:.2f},fgd:{means['fgd']:.2f}"
    assert re.search(r"^\s+1\s+[\d.]+\s+[\d.]+\s+\d+\s+\d+", output, re.MULTILINE)
    assert output.count("  mean  alloc@100%") == 2
    runs = report["policies"]["fgd"]["runs"]
    assert [run["seed"] for run in runs] == [0, 1]
    assert report["policies"]["fgd"]["allocation_at_arrival"]["mean"] == pytest.approx(
        sum(run["allocation_at_arrival"] for run in runs) / 2, abs=1e-3)
    svg = (tmp_path / "out.svg").read_text()
    assert svg.startswith("<svg") and svg.count("<polyline") == 2 and "fgd" in svg


def test_bad_input_is_refused_naming_the_option(small_trace, tmp_path):
    nodes, pods = small_trace
    with pytest.raises(CommandError, match="--policy: unknown worstfit"):
        replay("--nodes", str(nodes), "--pods", str(pods), "--policy", "spread,worstfit")
    with pytest.raises(CommandError, match="--arrival"):
        replay("--nodes", str(nodes), "--pods", str(pods), "--arrival", "0")
    broken = tmp_path / "broken.csv"
    broken.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\npod-1,abc,1,1,1000\n")
    with pytest.raises(CommandError, match=r"broken.csv:2: cpu_milli must be a whole number"):
        replay("--nodes", str(nodes), "--pods", str(broken))
    with pytest.raises(CommandError, match="missing column"):
        replay("--nodes", str(pods), "--pods", str(pods))


def test_replays_in_several_processes_give_the_same_figures(small_trace, tmp_path):
    nodes, pods = small_trace
    for jobs in ("1", "2"):
        replay("--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd-cpu", "--seeds", "2", "--jobs", jobs,
               "--json", str(tmp_path / f"jobs{jobs}.json"))
    runs = [json.loads((tmp_path / f"jobs{jobs}.json").read_text())["policies"]["fgd-cpu"]["runs"] for jobs in "12"]
    assert runs[0] == runs[1]
