"""`hf` end to end against a live server the test starts (design §16.4), and a simulated agent running the task."""

import io
import json
import socket
import stat
import threading

import pytest
from knox.settings import CONSTANTS

from scheduling.cycle.run import run_cycle
from tenants.cli import main as hf
from tenants.models import ApiTokenName, Tenant
from tenants.services import tenant_user_create
from tests.factories import make_node
from tests.nodes.test_agent_end_to_end import fleet  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def cli(live_server, tmp_path, monkeypatch, capsys):
    """Run `hf ARGS…` in-process: (exit status, stdout, stderr); config under tmp_path, no HF_* from outside."""
    monkeypatch.setenv("HF_CONFIG", str(tmp_path / "hf" / "config.json"))
    for name in ("HF_SERVER", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(hf, "FOLLOW_INTERVAL_SECONDS", 0.2)

    def run(*args: str, stdin: str = "") -> tuple[int, str, str]:
        capsys.readouterr()
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
        status = hf.main(list(args))
        out, err = capsys.readouterr()
        return status, out, err

    run.server = live_server.url
    run.config = tmp_path / "hf" / "config.json"
    return run


@pytest.fixture
def alice(tenant):
    return tenant_user_create(tenant=tenant, username="alice", password="alice-password")


def test_login_with_a_password_stores_a_private_config_and_ls_uses_it(cli, alice):
    status, out, _ = cli("login", "--server", cli.server, "--username", "alice", "--password-stdin",
                         stdin="alice-password\n")
    assert status == 0 and "logged in" in out
    assert stat.S_IMODE(cli.config.stat().st_mode) == 0o600
    stored = json.loads(cli.config.read_text())
    assert stored["server"] == cli.server and stored["token"].startswith("hfu_")
    assert cli("ls")[0] == 0
    # Named after the machine, on the API tokens page.
    assert ApiTokenName.objects.filter(
        token__token_key=stored["token"][:CONSTANTS.TOKEN_KEY_LENGTH], name=f"hf on {socket.gethostname()}"[:64]
    ).exists()


def test_refusals_are_one_line_with_the_apis_code_and_a_non_zero_status(cli, alice, monkeypatch):
    status, out, err = cli("login", "--server", cli.server, "--username", "alice", "--password-stdin",
                           stdin="wrong\n")
    assert (status, out, err) == (1, "", "hf: invalid_credentials: invalid username or password\n")
    assert not cli.config.exists()
    assert cli("ls")[2].startswith("hf: not logged in")
    monkeypatch.setenv("HF_SERVER", cli.server)
    monkeypatch.setenv("HF_TOKEN", "hfu_not-a-token")
    status, _, err = cli("ls")
    assert status == 1 and err.startswith("hf: authentication_failed: ") and err.count("\n") == 1
    monkeypatch.setenv("HF_SERVER", "http://127.0.0.1:9")
    assert cli("ls")[2].startswith("hf: unreachable: cannot reach http://127.0.0.1:9")


def test_submit_ls_describe_events_stop_quota_nodes(cli, alice, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_SERVER", cli.server)
    monkeypatch.setenv("HF_TOKEN", alice[1])
    status, out, _ = cli("submit", "--name", "resnet", "--gpus", "2", "--gpu-type", "nvidia", "--priority", "60",
                         "--label", "team=vision")
    assert status == 0 and out.startswith("submitted task ")
    task_id = int(out.split()[2])
    spec = tmp_path / "task.yaml"
    spec.write_text("name: bert\ntype: training\ngpu_required: 1\nlabels: {team: nlp}\n")
    status, out, _ = cli("submit", "-f", str(spec), "--json")
    assert status == 0 and json.loads(out)["name"] == "bert" and json.loads(out)["type"] == "training"
    bad = cli("submit", "--name", "x", "--gpus", "-1")
    assert bad[0] == 1 and bad[2].startswith("hf: min_value: ")

    status, out, _ = cli("ls")
    assert status == 0 and "resnet" in out and "bert" in out and "not attempted yet" in out
    assert "\x1b[" not in out, "no colour when the output is not a terminal"
    listed = json.loads(cli("ls", "--json", "--status", "pending")[1])
    assert {task["name"] for task in listed} == {"resnet", "bert"}

    status, out, _ = cli("describe", str(task_id))
    assert status == 0 and "Status:" in out and "pending" in out and "Why:" in out and "Events" in out
    assert "Timeout:  stopped after 7200 s; 10 s from SIGTERM to kill" in out
    assert json.loads(cli("describe", str(task_id), "--json")[1])["labels"] == {"team": "vision"}

    served = json.loads(cli("submit", "--name", "svc", "--type", "inference", "--gpus", "1", "--timeout", "none",
                            "--grace", "30", "--json")[1])
    assert (served["timeout_seconds"], served["termination_grace_seconds"]) == (None, 30)
    assert "Timeout:  runs until stopped; 30 s from SIGTERM to kill" in cli("describe", str(served["id"]))[1]
    assert cli("submit", "--name", "x", "--timeout", "59")[2].startswith("hf: min_value: ")
    assert cli("stop", str(served["id"]))[0] == 0

    status, out, _ = cli("stop", str(task_id))
    assert (status, out) == (0, f"task {task_id}: stopped\n")
    events = json.loads(cli("events", str(task_id), "--json")[1])
    assert [(event["from"], event["to"]) for event in events] == [("pending", "stopped")]
    assert "stopped" in cli("events", str(task_id))[1]

    status, out, _ = cli("quota")
    assert status == 0 and "tenant acme: 0 of unlimited GPUs in use" in out
    assert json.loads(cli("quota", "--json")[1])["tasks"]["pending"] == 1
    assert cli("nodes")[0] == 0 and json.loads(cli("nodes", "--json")[1]) == []

    _, stranger = tenant_user_create(tenant=Tenant.objects.create(name="globex"), username="bob",
                                     password="bob-password")
    monkeypatch.setenv("HF_TOKEN", stranger)
    status, _, err = cli("describe", str(task_id))
    assert status == 1 and err.startswith("hf: not_found: ")
    assert cli("logs", str(task_id))[2].startswith("hf: not_found: ")


def test_logs_follow_prints_a_running_tasks_output_until_it_ends(cli, fleet, monkeypatch):
    node, agent, session = fleet
    monkeypatch.setenv("HF_SERVER", cli.server)
    monkeypatch.setenv("HF_TOKEN", session.headers["Authorization"].split()[1])
    agent.run_once()
    status, out, _ = cli("submit", "--name", "train", "--type", "training", "--gpus", "1", "--label",
                         "HETEROFLOW_SIM_SECONDS=2")
    task_id = int(out.split()[2])
    assert run_cycle().bound == 1
    stop = threading.Event()

    def agent_loop():
        while not stop.is_set():
            agent.run_once()
            stop.wait(0.2)

    runner = threading.Thread(target=agent_loop)
    runner.start()
    try:
        status, out, _ = cli("logs", "-f", str(task_id))
    finally:
        stop.set()
        runner.join()
    assert status == 0
    assert "initializing process group" in out and "loss" in out and out.endswith("finished\n")
    assert cli("logs", "--tail", "1", str(task_id))[1] == "finished\n"


def test_nodes_reads_every_page_of_the_node_list(cli, alice, monkeypatch):
    """The node list is paged (issue 27 item 10): `hf nodes` follows the Link header to the last page."""
    for index in range(3):
        make_node(name=f"n{index}")
    monkeypatch.setattr(hf, "NODES_PAGE", 2)
    cli("login", "--server", cli.server, "--username", "alice", "--password-stdin", stdin="alice-password\n")
    status, out, _ = cli("nodes", "--json")
    assert status == 0 and [node["name"] for node in json.loads(out)] == ["n0", "n1", "n2"]



def test_usage_prints_the_tenants_own_card_hours_grouped_as_asked(cli, alice, other_tenant, monkeypatch):
    from datetime import date

    from scheduling.models import UsageRecord

    monkeypatch.setenv("HF_SERVER", cli.server)
    monkeypatch.setenv("HF_TOKEN", alice[1])
    for owner, gpu_type, seconds in ((alice[0].membership.tenant, "nvidia", 7200),
                                     (alice[0].membership.tenant, "ascend", 1800), (other_tenant, "nvidia", 36000)):
        UsageRecord.objects.create(tenant=owner, day=date(2026, 11, 1), gpu_type=gpu_type, task_type="batch",
                                   card_seconds=seconds)

    status, out, _ = cli("usage", "--from", "2026-11-01", "--to", "2026-11-30", "--by", "gpu_type")
    assert status == 0
    assert [line.replace("│", " ").split() for line in out.splitlines() if line.strip()][-3:] == [
        ["ascend", "0.50"], ["nvidia", "2.00"], ["2.50", "card-hours", "in", "all"]]

    status, _, err = cli("usage", "--from", "2026-11-30", "--to", "2026-11-01")
    assert status == 1 and err.startswith("hf: invalid: ") and "after" in err


def test_describe_shows_the_queue_position_the_last_cycle_published(cli, alice, monkeypatch):
    from scheduling.queue import immediate_queue
    from scheduling.queue import positions
    from scheduling.queue.positions import publish_queue_positions
    from tests.factories import make_task

    monkeypatch.setenv("HF_SERVER", cli.server)
    monkeypatch.setenv("HF_TOKEN", alice[1])
    task = make_task(tenant=alice[0].membership.tenant, gpu_type="nvidia", gpu_required=8)
    publish_queue_positions({task.id: (3, 7)})
    try:
        status, out, _ = cli("describe", str(task.id))
    finally:
        immediate_queue.connection().delete(positions.POSITIONS_KEY)

    assert status == 0 and "Queue position: 3 in the nvidia queue" in out


def test_quota_shows_every_types_used_nominal_and_borrowed(cli, alice, tenant, monkeypatch):
    from tenants.models import TenantGpuQuota

    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="nvidia", nominal=4)
    TenantGpuQuota.objects.create(tenant=tenant, gpu_type="ascend", nominal=2)
    # A type the cluster has and the tenant has no row for: listed, its nominal "-" (it may only borrow there).
    make_node(gpu_type="metax", cards=8)
    monkeypatch.setenv("HF_SERVER", cli.server)
    monkeypatch.setenv("HF_TOKEN", alice[1])

    status, out, _ = cli("quota")

    lines = [[cell for cell in line.split() if cell not in "│┃"] for line in out.splitlines()]
    assert status == 0 and ["GPU", "TYPE", "USED", "NOMINAL", "BORROWED"] in lines
    assert ["nvidia", "0", "4", "0"] in lines and ["ascend", "0", "2", "0"] in lines
    assert ["metax", "0", "-", "0"] in lines
    types = json.loads(cli("quota", "--json")[1])["types"]
    assert [(line["gpu_type"], line["nominal"], line["borrowed"]) for line in types] == [
        ("ascend", 2, 0), ("metax", None, 0), ("nvidia", 4, 0)]
