"""`hf` against a live server: what it prints is text (names, logs), the tidy points of the tenant's loop, groups,
templates and resubmission, completion."""

import json
import threading
import time

import pytest

from nodes.models import Node
from scheduling import lifecycle
from scheduling.models import Task, TaskTemplate
from scheduling.services.task_logs import task_log_append
from scheduling.services.task_transition import task_transition
from tenants.models import Tenant
from tenants.services import tenant_user_create
from tests.factories import make_node, make_task
from tests.tenants.cli.test_hf import alice, cli  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def signed_in(cli, alice, monkeypatch):  # noqa: F811
    monkeypatch.setenv("HF_SERVER", cli.server)
    monkeypatch.setenv("HF_TOKEN", alice[1])
    return cli


def _running_on(task: Task, node: Node, cards: list[int]) -> None:
    assert task_transition(task.id, lifecycle.PENDING, lifecycle.SCHEDULED, node=node, gpus=cards)
    assert task_transition(task.id, lifecycle.SCHEDULED, lifecycle.RUNNING)


def _finish(task: Task, reason: str = "exit code 0") -> None:
    assert task_transition(task.id, lifecycle.RUNNING, lifecycle.SUCCEEDED, reason=reason)


# --- what hf prints is text -------------------------------------------------------------------------------------


def test_names_with_rich_markup_are_printed_as_written_and_never_as_links(signed_in, tenant):
    make_task(tenant=tenant, name="[/]", gpu_required=1)
    make_task(tenant=tenant, name="[link=https://evil.example]safe[/link]", gpu_required=1)
    make_task(tenant=tenant, name="[bold red]loud", gpu_required=1)

    status, out, err = signed_in("ls")

    assert (status, err) == (0, "")
    assert "[/]" in out and "[link=https://evil.example]safe[/link]" in out and "[bold red]loud" in out
    assert "\x1b]8;" not in out, "no terminal hyperlink"


def test_log_text_loses_escape_and_control_sequences_unless_raw(signed_in, tenant):
    node = make_node(cards=1)
    task = make_task(tenant=tenant, gpu_required=1)
    _running_on(task, node, [0])
    hostile = ("step 1\n\x1b[2J\x1b[H\x1b]0;pwned\x07\x1b]52;c;ZXZpbA==\x07"
               "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07 here\rhidden\x9b31m\x00\n")
    task_log_append(node=node, task_id=task.id, data=hostile.encode())

    status, out, _ = signed_in("logs", str(task.id))
    assert status == 0 and out == "step 1\nclick here\nhidden\n"
    assert signed_in("logs", "--raw", str(task.id))[1] == hostile


def test_a_followed_log_drops_a_sequence_split_between_two_reads(signed_in, tenant):
    node = make_node(cards=1)
    task = make_task(tenant=tenant, gpu_required=1)
    _running_on(task, node, [0])
    task_log_append(node=node, task_id=task.id, data=b"before \x1b]0;ti")

    def later():
        time.sleep(0.5)
        task_log_append(node=node, task_id=task.id, data=b"tle\x07after\n")
        _finish(task)

    writer = threading.Thread(target=later)
    writer.start()
    try:
        status, out, _ = signed_in("logs", "-f", str(task.id))
    finally:
        writer.join()
    assert (status, out) == (0, "before after\n")


# --- the tidy points ---------------------------------------------------------------------------------------------


def test_gpus_is_a_count_for_every_task_and_describe_has_one_why_and_the_times(signed_in, tenant):
    node = make_node(cards=4)
    placed = make_task(tenant=tenant, name="placed", gpu_required=2)
    _running_on(placed, node, [1, 3])
    make_task(tenant=tenant, name="shard", gpu_memory_mb=4096)
    make_task(tenant=tenant, name="cpu", cpu_cores=2)

    listing = signed_in("ls")[1]
    rows = {cells[1]: cells for cells in ([cell.strip() for cell in line.split("│")]
                                          for line in listing.splitlines()[2:])}
    assert (rows["placed"][5], rows["shard"][5], rows["cpu"][5]) == ("2", "<1", "0"), listing

    out = signed_in("describe", str(placed.id))[1]
    assert "Cards:    2 (cards 1,3)" in out and "Started:" in out and "so far" in out
    assert out.count("Why:") == 1 and "Reason:" not in out

    _finish(placed, reason="exit code 0")
    out = signed_in("describe", str(placed.id))[1]
    assert "Why:      exit code 0" in out and "cards 1,3" not in out and "Port:" not in out
    assert "Ended:" in out and "so far" not in out


def test_a_label_without_a_value_is_refused(signed_in):
    status, _, err = signed_in("submit", "--name", "x", "--gpus", "1", "--label", "novalue")
    assert (status, err) == (1, "hf: invalid: --label novalue: expected KEY=VALUE\n")
    assert not Task.objects.exists()


def test_a_server_without_a_scheme_is_http_said_once(cli, alice):  # noqa: F811
    bare = cli.server.removeprefix("http://")
    status, out, err = cli("login", "--server", bare, "--username", "alice", "--password-stdin",
                           stdin="alice-password\n")
    assert status == 0 and f"assuming {cli.server}" in err
    assert json.loads(cli.config.read_text())["server"] == cli.server
    assert cli("ls") == (0, cli("ls")[1], ""), "not said again"


def test_login_reads_a_token_from_stdin(cli, alice):  # noqa: F811
    status, out, err = cli("login", "--server", cli.server, "--token-stdin", stdin=alice[1] + "\n")
    assert (status, err) == (0, "") and json.loads(cli.config.read_text())["token"] == alice[1]


def test_logs_of_a_pending_task_say_no_output_yet_or_wait_with_follow(signed_in, tenant):
    node = make_node(cards=1)
    task = make_task(tenant=tenant, gpu_required=1)
    status, out, err = signed_in("logs", str(task.id))
    assert (status, out, err) == (0, "", f"hf: task {task.id} is pending: no output yet\n")

    def starts_later():
        time.sleep(0.6)
        _running_on(task, node, [0])
        task_log_append(node=node, task_id=task.id, data=b"hello\n")
        _finish(task)

    runner = threading.Thread(target=starts_later)
    runner.start()
    try:
        status, out, _ = signed_in("logs", "-f", str(task.id))
    finally:
        runner.join()
    assert (status, out) == (0, "hello\n")


def test_submit_prints_the_never_fits_warning_at_once(signed_in):
    make_node(cards=8)
    status, out, err = signed_in("submit", "--name", "huge", "--gpus", "64", "--gpu-type", "nvidia")
    assert status == 0 and out.startswith("submitted task ")
    assert err.startswith("hf: warning: NeverFits: no registered nvidia node can ever hold this task")
    assert "world_size" in err


def test_completion_scripts_name_every_command(cli):  # noqa: F811
    for shell in ("bash", "zsh"):
        status, out, _ = cli("completion", shell)
        assert status == 0 and "complete -o default -F _hf_complete hf" in out
        assert "_hf_words_group=" in out and "resubmit" in out
    assert "bashcompinit" in cli("completion", "zsh")[1]


# --- groups ------------------------------------------------------------------------------------------------------


def test_group_submit_ls_describe_and_one_replicas_logs(signed_in, tenant, tmp_path, monkeypatch):
    spec = tmp_path / "group.yaml"
    spec.write_text("name: svc\ntype: inference\nworld_size: 2\ngpus_per_worker: 1\nlabels: {team: search}\n")
    status, out, _ = signed_in("group", "submit", str(spec), "--label", "tier=gold")
    assert status == 0 and out.startswith("submitted group ")
    group_id = int(out.split()[2])
    members = list(Task.objects.filter(group_id=group_id).order_by("rank"))
    assert [task.labels for task in members] == [{"team": "search", "tier": "gold"}] * 2

    listed = signed_in("group", "ls")[1]
    assert "svc" in listed and "inference" in listed
    described = signed_in("group", "describe", str(group_id))[1]
    assert "Labels:" in described and "team=search" in described and "Members" in described

    node = make_node(cards=2)
    _running_on(members[1], node, [0])
    task_log_append(node=node, task_id=members[1].id, data=b"replica one\n")
    assert signed_in("group", "logs", str(group_id), "--replica", "1") == (0, "replica one\n", "")
    status, _, err = signed_in("group", "logs", str(group_id), "--replica", "7")
    assert status == 1 and err.startswith(f"hf: not_found: group {group_id} has no replica 7")

    _, stranger = tenant_user_create(tenant=Tenant.objects.create(name="globex"), username="bob",
                                     password="bob-password")
    monkeypatch.setenv("HF_TOKEN", stranger)
    assert signed_in("group", "describe", str(group_id))[2].startswith("hf: not_found: ")


def test_a_service_of_multi_node_replicas_from_yaml_described_by_replica_and_rank(signed_in, tmp_path):
    spec = tmp_path / "group.yaml"
    spec.write_text("name: llm\ntype: inference\nworld_size: 1\nreplicas: 1\nnodes_per_replica: 2\n"
                    "gpus_per_worker: 1\n")
    status, out, _ = signed_in("group", "submit", str(spec))
    assert status == 0
    group_id = int(out.split()[2])
    head, worker = Task.objects.filter(group_id=group_id).order_by("rank")

    described = signed_in("group", "describe", str(group_id))[1]
    assert "1 × 2 nodes × 1 GPU" in described and "RANK" in described

    node = make_node(cards=2)
    for task, card in ((head, 0), (worker, 1)):
        _running_on(task, node, [card])
    task_log_append(node=node, task_id=head.id, data=b"serving\n")
    # A multi-node replica's output is its master's.
    assert signed_in("group", "logs", str(group_id), "--replica", "0") == (0, "serving\n", "")


# --- templates and resubmission ----------------------------------------------------------------------------------


def test_a_template_saved_from_flags_submits_with_overrides_and_is_the_tenants_own(signed_in, tenant):
    status, out, _ = signed_in("template", "save", "resnet", "--gpus", "2", "--image", "img:1", "--label",
                               "team=vision")
    assert (status, out) == (0, "saved template resnet\n")
    assert TaskTemplate.objects.get().fields == {"type": "batch", "image": "img:1", "command": "", "gpu_type": "",
                                                 "gpu_required": 2, "gpu_memory_mb": 0, "cpu_cores": 0.0,
                                                 "memory_mb": 0, "preemptible": False, "labels": {"team": "vision"},
                                                 "tolerations": [], "node_selector": {}, "env": {},
                                                 "termination_grace_seconds": 10}
    assert "resnet" in signed_in("template", "ls")[1]
    status, out, _ = signed_in("submit", "--template", "resnet", "--name", "run-7", "--gpus", "4", "--label",
                               "run=7")
    task = Task.objects.get(id=int(out.split()[2]))
    assert (task.name, task.gpu_required, task.image, task.labels) == (
        "run-7", 4, "img:1", {"team": "vision", "run": "7"})
    assert signed_in("template", "save", "resnet", "--gpus", "1")[2].startswith("hf: conflict: ")
    assert signed_in("submit", "--template", "nope", "--name", "x")[2].startswith("hf: not_found: ")
    assert signed_in("template", "rm", "resnet")[0] == 0 and not TaskTemplate.objects.exists()


def test_resubmit_submits_a_finished_task_again_and_refuses_an_active_one(signed_in, tenant):
    node = make_node(cards=2)
    task = make_task(tenant=tenant, name="train", gpu_required=2, image="img:1", labels={"team": "a"}, priority=70)
    status, _, err = signed_in("resubmit", str(task.id))
    assert status == 1 and err.startswith("hf: conflict: a pending task cannot be resubmitted")
    _running_on(task, node, [0, 1])
    _finish(task)

    status, out, _ = signed_in("resubmit", str(task.id))
    again = Task.objects.get(id=int(out.split()[2]))
    assert status == 0 and again.id != task.id and again.status == lifecycle.PENDING
    assert (again.name, again.gpu_required, again.image, again.labels, again.priority, again.node_id) == (
        "train", 2, "img:1", {"team": "a"}, 70, None)


def test_group_endpoints_scale_and_stop_through_the_service_api(signed_in, tenant, tmp_path):
    spec = tmp_path / "svc.yaml"
    spec.write_text("name: web\ntype: inference\nworld_size: 2\ngpus_per_worker: 1\nreplicas: 2\n")
    group_id = int(signed_in("group", "submit", str(spec))[1].split()[2])
    first = Task.objects.filter(group_id=group_id).order_by("rank").first()
    node = make_node(name="gpu-a", cards=2, internal_ip="10.0.0.7")
    _running_on(first, node, [0])
    Task.objects.filter(id=first.id).update(port=8123)

    status, out, _ = signed_in("group", "endpoints", str(group_id))
    assert status == 0 and "gpu-a" in out and "10.0.0.7:8123" in out
    assert json.loads(signed_in("group", "endpoints", str(group_id), "--json")[1]) == [
        {"task": first.id, "replica": first.rank, "node": "gpu-a", "address": "10.0.0.7", "port": 8123}]

    assert signed_in("group", "scale", str(group_id), "3") == (0, f"group {group_id}: 3 replicas desired\n", "")
    assert Task.objects.filter(group_id=group_id).exclude(status__in=lifecycle.TERMINAL_STATES).count() == 3
    status, _, err = signed_in("group", "scale", str(group_id), "-1")
    assert status == 1 and err.startswith("hf: ") and "replicas" in err

    status, out, _ = signed_in("group", "stop", str(group_id))
    assert status == 0 and out == f"group {group_id}: stopping (each replica gets its grace; nothing is rebuilt)\n"
    assert Task.objects.get(id=first.id).status == lifecycle.STOPPING
    status, _, err = signed_in("group", "stop", str(group_id))
    assert status == 1 and err.startswith("hf: group_stopped: ")
