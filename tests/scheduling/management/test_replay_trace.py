"""`manage.py replay_trace` (design §15.9) on a small trace cut from openb, written to a temporary directory, and
with `--from-db` on tasks and nodes seeded in the test database."""

import csv
import json
import re
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from nodes.models import GPU, Node, NodeChange
from scheduling.models import CycleRecord, SchedulingAttempt, Task, TaskEvent
from tests.factories import make_node, make_task

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
        replay("--nodes", str(nodes), "--pods", str(pods), "--policy", "fgd", "--seeds", "2", "--jobs", jobs,
               "--json", str(tmp_path / f"jobs{jobs}.json"))
    runs = [json.loads((tmp_path / f"jobs{jobs}.json").read_text())["policies"]["fgd"]["runs"] for jobs in "12"]
    assert runs[0] == runs[1]


# --from-db: the tasks submitted to the cluster, replayed on its nodes.

HOUR = timedelta(hours=1)
WRITTEN_TABLES = (Task, TaskEvent, SchedulingAttempt, CycleRecord, Node, GPU, NodeChange)


def created(task: Task, at) -> Task:
    Task.objects.filter(id=task.id).update(created_at=at)
    return task


@pytest.fixture
def two_by_two(tenant, other_tenant):
    """Two nodes of two cards; in the window 1 card, 1 card, 2 cards (one tenant each way), and two tasks created
    before it. Spread puts the single cards on both nodes and has no node left for the pair: 2 of 4 GPUs; binpack
    stacks them and the pair takes the other node: all 4."""
    make_node(name="a", cards=2)
    make_node(name="b", cards=2)
    now = timezone.now()
    for minutes, owner, gpus in ((50, tenant, 1), (40, other_tenant, 1), (30, tenant, 2)):
        created(make_task(tenant=owner, gpu_required=gpus), now - timedelta(minutes=minutes))
    for hours in (30, 48):
        created(make_task(tenant=tenant, gpu_required=2, status="succeeded"), now - hours * HOUR)


def from_db(tmp_path, *args: str) -> tuple[str, dict]:
    output = replay("--from-db", "--seeds", "2", "--jobs", "1", "--json", str(tmp_path / "db.json"), *args)
    return output, json.loads((tmp_path / "db.json").read_text())


@pytest.mark.django_db
def test_only_the_window_s_tasks_are_replayed_and_the_policies_differ_as_derived(two_by_two, tmp_path):
    output, report = from_db(tmp_path, "--since", "24h", "--policy", "binpack,spread", "--svg", str(tmp_path / "db.svg"))

    assert (report["source"], report["tasks"], report["never_started"], report["node_count"], report["gpus"]) == (
        "database", 3, 3, 2, 4)
    assert report["arrival"] == 1.0
    binpack, spread = (report["policies"][name] for name in ("binpack", "spread"))
    assert [run["arrived_tasks"] for run in binpack["runs"] + spread["runs"]] == [3] * 4
    assert [(run["allocation_at_full"], run["allocation_at_arrival"], run["failed_tasks"]) for run in binpack["runs"]] \
        == [(100.0, 100.0, 0)] * 2
    assert [(run["allocation_at_full"], run["allocation_at_arrival"], run["failed_tasks"]) for run in spread["runs"]] \
        == [(50.0, 50.0, 1)] * 2
    assert output.strip().splitlines()[-1] == "allocation_at_arrival=binpack:100.00,spread:50.00"
    assert "3 tasks (0 finished, 0 still running, 3 never started: 1h each); 2 nodes, 4 GPUs" in output
    assert (tmp_path / "db.svg").read_text().count("<polyline") == 2

    _, week = from_db(tmp_path, "--since", "7d", "--policy", "binpack")
    assert week["tasks"] == 5 and week["window"]["length"] == "7d"


@pytest.mark.django_db
def test_finished_tasks_leave_after_their_run_and_the_others_after_the_default(tenant, tmp_path):
    make_node(cards=2)
    now = timezone.now()
    created(make_task(tenant=tenant, gpu_required=2, status="succeeded", started_at=now - 3 * HOUR,
                      finished_at=now - 2 * HOUR), now - 3 * HOUR)
    created(make_task(tenant=tenant, gpu_required=2), now - 60 * timedelta(minutes=1))
    created(make_task(tenant=tenant, gpu_required=2), now - 30 * timedelta(minutes=1))

    # The first left before the second came; the second still holds both cards when the third comes...
    _, hour = from_db(tmp_path, "--policy", "binpack", "--seeds", "1")
    assert [(run["failed_tasks"], run["allocation_at_arrival"]) for run in hour["policies"]["binpack"]["runs"]] == [
        (1, 100.0)]
    # ... unless a task that never started runs only 20 minutes.
    _, short = from_db(tmp_path, "--policy", "binpack", "--seeds", "1", "--default-duration", "20m")
    assert [(run["failed_tasks"], run["allocation_at_arrival"]) for run in short["policies"]["binpack"]["runs"]] == [
        (0, 100.0)]
    assert (short["finished"], short["never_started"], short["default_duration"]) == (1, 2, "20m")


@pytest.mark.django_db
def test_the_replay_writes_nothing_to_the_database(two_by_two, tmp_path):
    before = table_fingerprints()
    from_db(tmp_path, "--policy", "spread,binpack,fgd")
    assert table_fingerprints() == before


def table_fingerprints() -> dict[str, tuple[int, str]]:
    fingerprints = {}
    with connection.cursor() as cursor:
        for model in WRITTEN_TABLES:
            table = model._meta.db_table
            cursor.execute(f"SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t.id), '')) FROM {table} t")
            fingerprints[table] = cursor.fetchone()
    return fingerprints


@pytest.mark.django_db
@pytest.mark.parametrize("since", ["24", "24x", "0h", "-1h", "h", "1.5h", ""])
def test_a_bad_window_is_refused_naming_the_option(since, two_by_two):
    with pytest.raises(CommandError, match=r"^--since: .* is not a duration"):
        replay("--from-db", f"--since={since}")


@pytest.mark.django_db
def test_options_of_the_other_mode_are_refused(two_by_two, small_trace):
    nodes, pods = small_trace
    with pytest.raises(CommandError, match=r"^--default-duration: '1 hour' is not a duration"):
        replay("--from-db", "--default-duration", "1 hour")
    with pytest.raises(CommandError, match=r"^--pods reads a trace"):
        replay("--from-db", "--pods", str(pods))
    with pytest.raises(CommandError, match=r"^--arrival reads a trace"):
        replay("--from-db", "--arrival", "1.3")
    with pytest.raises(CommandError, match=r"^--since applies only with --from-db"):
        replay("--nodes", str(nodes), "--pods", str(pods), "--since", "24h")


@pytest.mark.django_db
def test_an_empty_window_is_refused(tenant):
    make_node(cards=2)
    created(make_task(tenant=tenant, gpu_required=1), timezone.now() - 3 * HOUR)
    with pytest.raises(CommandError, match=r"^no tasks were created in the last 2h .*nothing to replay") as refused:
        replay("--from-db", "--since", "2h")
    assert refused.value.returncode == 1


@pytest.mark.django_db
def test_a_cluster_without_gpus_is_refused(tenant):
    make_node(cards=2, schedulable=False)
    make_task(tenant=tenant, gpu_required=1)
    with pytest.raises(CommandError, match="no schedulable node with GPUs"):
        replay("--from-db")


@pytest.mark.django_db
def test_report_keeps_the_chart_and_figures_in_the_reports_folder(two_by_two, tmp_path, settings):
    settings.REPLAY_REPORT_DIR = tmp_path / "reports"
    output = replay("--from-db", "--policy", "binpack,spread", "--seeds", "1", "--jobs", "1", "--report")

    chart, = (tmp_path / "reports").glob("replay-*.svg")
    figures = json.loads(chart.with_suffix(".json").read_text())
    assert f"report: {chart}" in output
    assert chart.read_text().startswith("<svg") and list(figures["policies"]) == ["binpack", "spread"]
    assert figures["tasks"] == 3 and "made_at" in figures


def test_dynamic_prints_waits_per_size_class_and_ends_with_the_time_weighted_allocation(small_trace, tmp_path):
    nodes, pods = small_trace
    output = replay("--dynamic", "--nodes", str(nodes), "--pods", str(pods), "--compress", "300", "--policy",
                    "binpack,fgd", "--seeds", "2", "--jobs", "1", "--json", str(tmp_path / "dynamic.json"),
                    "--svg", str(tmp_path / "dynamic.svg"))

    figures = json.loads((tmp_path / "dynamic.json").read_text())
    assert figures["mode"] == "dynamic" and figures["compress"] == 300
    means = {name: figures["policies"][name]["time_weighted_allocation"]["mean"] for name in ("binpack", "fgd")}
    assert output.strip().splitlines()[-1] == \
        f"time_weighted_allocation=binpack:{means['binpack']:.2f},fgd:{means['fgd']:.2f}"
    assert re.search(r"^\s+1 card\s+\d+\s+[\d.]+ ± [\d.]+", output, re.MULTILINE)
    assert "fractional" in figures["policies"]["fgd"]["classes"]
    assert [run["seed"] for run in figures["policies"]["fgd"]["runs"]] == [0, 1]
    svg = (tmp_path / "dynamic.svg").read_text()
    assert svg.startswith("<svg") and svg.count('class="allocation"') == 2 and 'class="wait"' in svg


def test_dynamic_with_tenants_prints_each_tenants_usage_and_jains_index(small_trace, tmp_path):
    nodes, pods = small_trace
    plan = tmp_path / "tenants.json"
    plan.write_text(json.dumps({"tenants": {"acme": {"gpu_quota": 4}, "globex": {}},
                                "pods": {"openb-pod-0000": "acme", "openb-pod-0010": "acme"}, "default": "globex"}))

    output = replay("--dynamic", "--nodes", str(nodes), "--pods", str(pods), "--compress", "300", "--policy", "fgd",
                    "--seeds", "1", "--jobs", "1", "--tenants", str(plan))

    assert "tenant acme:" in output and "tenant globex:" in output and "Jain's index" in output


def test_dynamic_with_a_cohort_prints_reclaim_latency_evictions_and_jain_over_nominal(small_trace, tmp_path):
    nodes, pods = small_trace
    plan = tmp_path / "tenants.json"
    plan.write_text(json.dumps({"tenants": {"acme": {"nominal": 2, "cohort": "lab"},
                                            "globex": {"nominal": 2, "cohort": "lab"}},
                                "pods": {"openb-pod-0000": "acme", "openb-pod-0010": "acme"}, "default": "globex"}))

    output = replay("--dynamic", "--nodes", str(nodes), "--pods", str(pods), "--compress", "300", "--policy", "fgd",
                    "--seeds", "1", "--jobs", "1", "--tenants", str(plan), "--json", str(tmp_path / "figures.json"))

    assert re.search(r"^  tenant globex: [\d.]+ ± [\d.]+ GPUs held on average; wait p50 within nominal \d+ ± \d+ s; "
                     r"wait p99 within nominal \d+ ± \d+ s$", output, re.MULTILINE), output
    assert re.search(r"^  Jain's index, second half [\d.]+ ± [\d.]+$", output, re.MULTILINE)
    assert re.search(r"^  borrowed tasks evicted by reclaims [\d.]+ ± [\d.]+$", output, re.MULTILINE)
    summary = json.loads((tmp_path / "figures.json").read_text())["policies"]["fgd"]
    assert {"jain", "jain_second_half", "evicted"} <= set(summary)
    assert "within_nominal_wait_p99" in summary["tenants"]["globex"]


@pytest.mark.parametrize("args, message", [
    (["--dynamic", "--arrival", "1.2"], "--arrival does not apply with --dynamic"),
    (["--dynamic", "--from-db"], "--from-db does not apply with --dynamic"),
    (["--compress", "10"], "--compress applies only with --dynamic"),
    (["--node-stride", "2"], "--node-stride applies only with --dynamic"),
    (["--dynamic", "--compress", "0"], "--compress must be in"),
    (["--dynamic", "--pods", str(TRACE / "openb_pod_list_multigpu20.csv")], "missing column(s) creation_time"),
])
def test_dynamic_refusals_name_the_option(args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        replay(*args, "--seeds", "1", "--jobs", "1")


def test_bound_prints_the_upper_bound_the_offline_packing_and_each_policys_gap(small_trace, tmp_path):
    nodes, pods = small_trace
    output = replay("--nodes", str(nodes), "--pods", str(pods), "--policy", "binpack,fgd", "--seeds", "2",
                    "--jobs", "1", "--bound", "--json", str(tmp_path / "bound.json"))

    figures = json.loads((tmp_path / "bound.json").read_text())
    bound = figures["bound"]
    for seed_bound in bound["per_seed"]:
        assert seed_bound["offline_packing"] <= seed_bound["upper"] + 1e-6
    for name in ("binpack", "fgd"):
        runs = figures["policies"][name]["runs"]
        assert all(run["allocation_at_arrival"] <= seed_bound["upper"] + 1e-6
                   for run, seed_bound in zip(runs, bound["per_seed"]))
        assert figures["policies"][name]["gap_to_bound"]["mean"] >= 0
        assert f"  {name}: gap to the bound " in output
    assert "bound (LP upper bound" in output and output.strip().splitlines()[-1].startswith("allocation_at_arrival=")


@pytest.mark.parametrize("args", [["--dynamic"], ["--from-db"]])
def test_bound_is_refused_outside_the_static_trace_replay(args):
    with pytest.raises(CommandError, match="--bound applies to the static trace replay only"):
        replay(*args, "--bound", "--seeds", "1", "--jobs", "1")


def test_mix_replays_the_pods_in_the_proportions_asked_for(small_trace, tmp_path):
    nodes, pods = small_trace
    args = ("--nodes", str(nodes), "--pods", str(pods), "--policy", "binpack", "--seeds", "1", "--jobs", "1")

    output = replay(*args, "--mix", "shared=0.9,seed=2", "--json", str(tmp_path / "mixed.json"))

    assert "mixed shared=0.9,seed=2:" in output.splitlines()[0]
    assert json.loads((tmp_path / "mixed.json").read_text())["mix"] == "shared=0.9,seed=2"
    assert output.splitlines()[-1] != replay(*args).splitlines()[-1]
    with pytest.raises(CommandError, match="--mix: shared must be a fraction from 0 to 1"):
        replay(*args, "--mix", "shared=2")


@pytest.mark.parametrize("args", [["--dynamic"], ["--from-db"]])
def test_mix_is_refused_outside_the_static_trace_replay(args):
    with pytest.raises(CommandError, match="--mix applies to the static trace replay only"):
        replay(*args, "--mix", "shared=0.5", "--seeds", "1", "--jobs", "1")
