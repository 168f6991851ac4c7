import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from nodes.agent.runtime import (
    CARDS_VISIBLE_TO_EVERY_CONTAINER, CONTAINER_GONE_EXIT_CODE, ContainerLimits, DockerRuntime, SimulatedRuntime,
    TaskSpec, docker_run_argv, run_docker,
)

# Every container is confined whatever its task (design §16.5), its output bounded on the node.
CONFINED = ["--pids-limit", "4096", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--log-driver", "local", "--log-opt", "max-size=10m", "--log-opt", "max-file=3"]


def test_docker_argv_for_an_nvidia_inference_task():
    spec = TaskSpec.from_work_item({
        "id": 42, "image": "vllm/vllm-openai:v0.6.3", "command": "vllm serve /models/qwen --port 8001",
        "gpus": [2, 3], "port": 8001, "gpu_type": "nvidia",
        "env": {"HETEROFLOW_GPU_MEMORY_LIMIT_MB": 8192, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"},
        "tenant": 3, "cpu_cores": 2.5, "memory_mb": 16384, "node_address": "10.0.0.7",
    })
    assert docker_run_argv(spec) == [
        "docker", "run", "-d", "--name", "heteroflow-task-42", *CONFINED,
        "--cpus", "2.5", "--memory", "16384m", "--memory-swap", "16384m", "--network", "heteroflow-tenant-3",
        "-e", "CUDA_VISIBLE_DEVICES=0,1",
        "-e", "HETEROFLOW_GPU_MEMORY_LIMIT_MB=8192",
        "-e", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50",
        "-p", "10.0.0.7:8001:8001",
        "--gpus", '"device=2,3"',
        "vllm/vllm-openai:v0.6.3", "sh", "-c", "vllm serve /models/qwen --port 8001",
    ]


def test_docker_argv_for_ascend_passes_device_nodes():
    spec = TaskSpec(id=7, image="mindie:1.0", command="python infer.py", gpus=(1,), gpu_type="ascend")
    assert docker_run_argv(spec) == [
        "docker", "run", "-d", "--name", "heteroflow-task-7", *CONFINED,
        "-e", "ASCEND_VISIBLE_DEVICES=0",
        "--device", "/dev/davinci1", "--device", "/dev/davinci_manager", "--device", "/dev/devmm_svm",
        "--device", "/dev/hisi_hdc", "-v", "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro",
        "mindie:1.0", "sh", "-c", "python infer.py",
    ]


def test_shared_device_vendors_name_host_cards():
    # /dev/kfd exposes every DCU, so HIP_VISIBLE_DEVICES must pick the assigned host cards.
    spec = TaskSpec(id=8, image="dtk:24.04", command="python train.py", gpus=(4, 5), gpu_type="hygon")
    assert docker_run_argv(spec) == [
        "docker", "run", "-d", "--name", "heteroflow-task-8", *CONFINED, "-e", "HIP_VISIBLE_DEVICES=4,5",
        "--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", "video",
        "dtk:24.04", "sh", "-c", "python train.py",
    ]


@pytest.mark.parametrize(("gpu_type", "variable"), [
    ("nvidia", "CUDA_VISIBLE_DEVICES"), ("ascend", "ASCEND_VISIBLE_DEVICES"), ("musa", "MTHREADS_VISIBLE_DEVICES"),
    ("hygon", "HIP_VISIBLE_DEVICES"), ("metax", "MACA_VISIBLE_DEVICES"), ("enflame", "TOPS_VISIBLE_DEVICES"),
    ("iluvatar", "CUDA_VISIBLE_DEVICES"), ("biren", "BR_VISIBLE_DEVICES"), ("cambricon", "MLU_VISIBLE_DEVICES"),
    ("kunlun", "XPU_VISIBLE_DEVICES"),
])
def test_every_vendor_gets_its_visible_devices_variable(gpu_type, variable):
    argv = docker_run_argv(TaskSpec(id=1, image="img", command="true", gpus=(0,), gpu_type=gpu_type))
    assert argv[argv.index(f"{variable}=0") - 1] == "-e"


def test_cpu_only_task_gets_no_device_flags_and_unknown_type_with_cards_is_refused():
    assert docker_run_argv(TaskSpec(id=3, image="busybox", command="echo hi")) == [
        "docker", "run", "-d", "--name", "heteroflow-task-3", *CONFINED, "busybox", "sh", "-c", "echo hi"]
    with pytest.raises(ValueError):
        docker_run_argv(TaskSpec(id=3, image="busybox", command="echo hi", gpus=(0,), gpu_type="tpu"))


def test_work_item_cards_may_be_card_objects():
    spec = TaskSpec.from_work_item({"id": "5", "image": "img", "command": "true", "gpus": [{"index": 1}, {"index": 6}]},
                                   default_gpu_type="metax")
    assert (spec.id, spec.gpus, spec.gpu_type, spec.port) == (5, (1, 6), "metax", None)


def test_a_port_is_published_on_loopback_without_an_internal_address_and_everywhere_only_when_asked():
    """issue 27 item 8: `-p 8001:8001` published the task's port on every interface of the node."""
    spec = TaskSpec(id=4, image="img", command="serve", port=8001)
    assert "127.0.0.1:8001:8001" in docker_run_argv(spec)
    assert "[fd00::7]:8001:8001" in docker_run_argv(TaskSpec(id=4, image="img", command="serve", port=8001,
                                                             node_address="fd00::7"))
    assert "0.0.0.0:8001:8001" in docker_run_argv(spec, publish_address="0.0.0.0")


def test_only_the_vendors_whose_containers_see_every_card_are_single_tenant():
    assert CARDS_VISIBLE_TO_EVERY_CONTAINER == {"hygon", "metax", "biren"}


def _docker_calls(fake) -> list[list[str]]:
    """The docker commands among a fake's calls (the port guard's iptables ones aside)."""
    return [call for call in fake.calls if call[0] == "docker"]


class FakeDocker:
    def __init__(self, results: dict[str, tuple[int, str, str]]):
        self.results = results
        self.calls: list[list[str]] = []

    def __call__(self, argv, *, binary: bool = False):
        self.calls.append(list(argv))
        returncode, stdout, stderr = self.results.get(argv[1], (0, "", ""))
        if binary:
            stdout, stderr = (part if isinstance(part, bytes) else part.encode() for part in (stdout, stderr))
        return subprocess.CompletedProcess(argv, returncode, stdout, stderr)


def test_docker_stop_gives_the_container_its_grace_without_waiting_and_kill_is_docker_kill():
    docker = FakeDocker({})
    runtime = DockerRuntime(docker)
    runtime.stop("heteroflow-task-9", 30)
    runtime.kill("heteroflow-task-9")
    runtime.release("heteroflow-task-9")  # waits for the `docker stop` thread
    calls = _docker_calls(docker)
    assert sorted(calls[:2]) == [["docker", "kill", "heteroflow-task-9"],
                                 ["docker", "stop", "-t", "30", "heteroflow-task-9"]]
    assert calls[-1] == ["docker", "rm", "-f", "heteroflow-task-9"]


def test_docker_stop_returns_while_docker_waits_out_the_grace():
    gate = threading.Event()

    def slow_docker(argv):
        gate.wait(10)  # `docker stop -t 600` blocks until the container is down
        return subprocess.CompletedProcess(argv, 0, "", "")

    runtime = DockerRuntime(slow_docker)
    started = time.monotonic()
    runtime.stop("heteroflow-task-9", 600)
    assert time.monotonic() - started < 1
    gate.set()
    runtime.release("heteroflow-task-9")


def test_docker_output_is_read_window_by_window():
    docker = FakeDocker({"logs": (0, "step 1\n", "warning\n")})
    runtime = DockerRuntime(docker)
    assert runtime.read_output("heteroflow-task-9") == b"step 1\nwarning\n"
    first_until = docker.calls[0][3]
    assert docker.calls[0] == ["docker", "logs", "--until", first_until, "heteroflow-task-9"]
    runtime.read_output("heteroflow-task-9")
    assert docker.calls[1][4:] == ["--since", first_until, "heteroflow-task-9"]
    assert float(docker.calls[1][3]) >= float(first_until)


def test_output_that_is_not_utf8_is_read_as_bytes_and_the_window_moves_on():
    """One byte that is not UTF-8 stopped a task's log for good: the strict decode raised, the window stayed."""
    docker = FakeDocker({"logs": (0, b"caf\xe9 \xff\n", b"ok\n")})
    runtime = DockerRuntime(docker)
    assert runtime.read_output("heteroflow-task-9") == b"caf\xe9 \xff\nok\n"
    docker.results["logs"] = (0, b"later\n", b"")
    assert runtime.read_output("heteroflow-task-9") == b"later\n"
    assert docker.calls[1][4:] == ["--since", docker.calls[0][3], "heteroflow-task-9"]


def test_the_docker_command_reads_any_bytes(tmp_path):
    """The real runner, on a stand-in `docker` printing bytes that are not UTF-8: bytes for logs, replacement
    characters in text, never an exception."""
    printer = [sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'caf\\xe9\\n')"]
    assert run_docker(printer, binary=True).stdout == b"caf\xe9\n"
    assert run_docker(printer).stdout == "caf\ufffd\n"


def test_docker_output_of_an_unreachable_daemon_is_read_next_time():
    docker = FakeDocker({"logs": (1, "", "Cannot connect to the Docker daemon")})
    runtime = DockerRuntime(docker)
    assert runtime.read_output("heteroflow-task-9") == b""
    runtime.read_output("heteroflow-task-9")
    assert "--since" not in docker.calls[1]


@pytest.mark.parametrize(("inspect", "expected"), [
    ((0, "running 0\n", ""), None),
    ((0, "exited 3\n", ""), 3),
    ((1, "", "Error: No such object: heteroflow-task-9"), CONTAINER_GONE_EXIT_CODE),
    ((1, "", "Cannot connect to the Docker daemon"), None),
])
def test_docker_poll(inspect, expected):
    assert DockerRuntime(FakeDocker({"inspect": inspect})).poll("heteroflow-task-9") == expected


def test_docker_start_runs_the_container_on_its_tenants_network_created_once():
    docker = FakeDocker({"network": (1, "", "Error response from daemon: network with name heteroflow-tenant-3 "
                                            "already exists")})
    runtime = DockerRuntime(docker, publish_address="10.1.2.3")
    for task_id in (1, 2):
        runtime.start(TaskSpec(id=task_id, image="img", command="serve", port=8000 + task_id, tenant=3))
    calls = _docker_calls(docker)
    assert [call[:3] for call in calls] == [["docker", "network", "create"], ["docker", "network", "inspect"],
                                            ["docker", "info", "--format"], ["docker", "run", "-d"],
                                            ["docker", "run", "-d"]]
    assert calls[0][-1] == "heteroflow-tenant-3"
    assert "10.1.2.3:8001:8001" in calls[3]


def test_a_network_that_cannot_be_created_keeps_the_container_from_starting():
    docker = FakeDocker({"network": (1, "", "Cannot connect to the Docker daemon")})
    with pytest.raises(RuntimeError, match="network create"):
        DockerRuntime(docker).start(TaskSpec(id=1, image="img", command="true", tenant=3))
    assert [call[1] for call in docker.calls] == ["network"]


def _run_calls(docker) -> list[list[str]]:
    return [call for call in docker.calls if call[:2] == ["docker", "run"]]


def test_every_container_writes_its_output_through_a_bounded_local_log():
    """Unbounded json-file logs filled a node's disk with one task's output."""
    argv = docker_run_argv(TaskSpec(id=3, image="busybox", command="yes"))
    assert argv[argv.index("--log-driver") + 1] == "local"
    assert ["--log-opt", "max-size=10m", "--log-opt", "max-file=3"] == argv[argv.index("--log-driver") + 2:][:4]
    limits = ContainerLimits(log_max_size="50m", log_max_files=2)
    assert "max-size=50m" in docker_run_argv(TaskSpec(id=3, image="busybox", command="yes"), limits=limits)
    assert "--storage-opt" not in argv


@pytest.mark.parametrize(("info", "bounded"), [
    ('btrfs null', True),
    ('zfs [["Zpool","tank"]]', True),
    ('overlay2 [["Backing Filesystem","xfs"],["Supports d_type","true"]]', True),
    ('overlay2 [["Backing Filesystem","extfs"],["Supports d_type","true"]]', False),
    ('overlayfs null', False),
])
def test_the_writable_layer_is_bounded_where_the_storage_driver_takes_a_quota(info, bounded):
    docker = FakeDocker({"info": (0, info + "\n", "")})
    runtime = DockerRuntime(docker, limits=ContainerLimits(disk_gb=40))
    for task_id in (1, 2):
        runtime.start(TaskSpec(id=task_id, image="img", command="true"))
    runs = _run_calls(docker)
    assert [("--storage-opt" in run) for run in runs] == [bounded, bounded]
    if bounded:
        assert runs[0][runs[0].index("--storage-opt") + 1] == "size=40G"
    assert [call[1] for call in docker.calls].count("info") == 1, "the driver is asked once"


def test_overlay_on_xfs_without_pquota_runs_the_container_unbounded_and_stops_asking(caplog):
    refusal = ("docker: Error response from daemon: --storage-opt is supported only for overlay over xfs with "
               "'pquota' mount option.")

    class RefusesQuota(FakeDocker):
        def __call__(self, argv, *, binary=False):
            if argv[1] == "run" and "--storage-opt" in argv:
                self.calls.append(list(argv))
                return subprocess.CompletedProcess(argv, 125, "", refusal)
            return super().__call__(argv, binary=binary)

    docker = RefusesQuota({"info": (0, 'overlay2 [["Backing Filesystem","xfs"]]', "")})
    runtime = DockerRuntime(docker)
    assert runtime.start(TaskSpec(id=1, image="img", command="true")) == "heteroflow-task-1"
    runtime.start(TaskSpec(id=2, image="img", command="true"))
    assert [("--storage-opt" in run) for run in _run_calls(docker)] == [True, False, False]
    assert "not bounded" in caplog.text


def test_no_disk_limit_asks_the_daemon_nothing():
    docker = FakeDocker({})
    DockerRuntime(docker, limits=ContainerLimits(disk_gb=0)).start(TaskSpec(id=1, image="img", command="true"))
    assert [call[1] for call in docker.calls] == ["run"] and "--storage-opt" not in docker.calls[0]


def test_docker_start_failure_raises():
    with pytest.raises(RuntimeError, match="Conflict"):
        DockerRuntime(FakeDocker({"run": (125, "", "Conflict. The container name is already in use")})).start(
            TaskSpec(id=9, image="img", command="true"))


def wait_for_exit(runtime: SimulatedRuntime, handle, timeout: float = 10.0) -> int | None:
    deadline = time.monotonic() + timeout
    while (code := runtime.poll(handle)) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    return code


def test_simulated_runtime_runs_a_real_process_for_the_chosen_time_and_exit_code():
    runtime = SimulatedRuntime()
    started = time.monotonic()
    handle = runtime.start(TaskSpec(id=1, image="sim", command="", env={"HETEROFLOW_SIM_SECONDS": "0.2",
                                                                          "HETEROFLOW_SIM_EXIT_CODE": "3"}))
    assert runtime.poll(handle) is None
    assert wait_for_exit(runtime, handle) == 3
    assert time.monotonic() - started >= 0.2


def test_simulated_runtime_reads_labels_and_defaults_to_success():
    runtime = SimulatedRuntime()
    handle = runtime.start(TaskSpec(id=2, image="sim", command="", labels={"HETEROFLOW_SIM_SECONDS": "0.2"}))
    assert wait_for_exit(runtime, handle) == 0


def test_simulated_runtime_stop_terminates_the_process():
    runtime = SimulatedRuntime()
    handle = runtime.start(TaskSpec(id=3, image="sim", command=""))  # 30 s by default
    started = time.monotonic()
    runtime.stop(handle, 10)
    assert wait_for_exit(runtime, handle) is not None
    assert time.monotonic() - started < 5


def test_docker_adopts_its_containers_by_name():
    docker = FakeDocker({"ps": (0, "heteroflow-task-12\nother-container\nheteroflow-task-7\nheteroflow-task-x\n", "")})
    assert DockerRuntime(docker).adopt() == {12: "heteroflow-task-12", 7: "heteroflow-task-7"}
    assert docker.calls == [["docker", "ps", "-a", "--filter", "name=heteroflow-task-", "--format", "{{.Names}}"]]


def test_docker_adoption_fails_loudly_without_a_daemon():
    with pytest.raises(RuntimeError, match="docker ps failed"):
        DockerRuntime(FakeDocker({"ps": (1, "", "Cannot connect to the Docker daemon")})).adopt()


def wait_for_exec(pid: int, timeout: float = 5.0) -> None:
    """Until the child runs its own command line (right after the fork it still shows ours)."""
    deadline = time.monotonic() + timeout
    while b"heteroflow-task-" not in Path(f"/proc/{pid}/cmdline").read_bytes() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_simulated_runtime_on_the_same_state_directory_adopts_and_stops_a_running_process(tmp_path):
    first = SimulatedRuntime(tmp_path)
    wait_for_exec(first.start(TaskSpec(id=4, image="sim", command="")).pid)  # 30 s by default

    adopted = SimulatedRuntime(tmp_path).adopt()

    assert list(adopted) == [4]
    later = SimulatedRuntime(tmp_path)
    assert later.poll(adopted[4]) is None
    started = time.monotonic()
    later.stop(adopted[4], 10)
    assert wait_for_exit(later, adopted[4]) is not None
    assert time.monotonic() - started < 5
    assert SimulatedRuntime(tmp_path).adopt() == {}


def test_an_adopted_process_that_ended_meanwhile_reports_its_exit_code(tmp_path):
    first = SimulatedRuntime(tmp_path)
    handle = first.start(TaskSpec(id=8, image="sim", command="", env={"HETEROFLOW_SIM_SECONDS": "0.1",
                                                                     "HETEROFLOW_SIM_EXIT_CODE": "3"}))
    handle.popen.wait(timeout=10)

    later = SimulatedRuntime(tmp_path)
    adopted = later.adopt()
    assert list(adopted) == [8]
    assert later.poll(adopted[8]) == 3
    assert b"simulated failure (exit code 3)" in later.read_output(adopted[8])
    later.release(adopted[8])
    assert later.adopt() == {}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("kind", "expected"), [("training", b"loss"), ("inference", b"Uvicorn running on"),
                                                ("batch", b"records processed")])
def test_the_simulated_output_looks_like_its_kind_and_is_read_once(kind, expected):
    runtime = SimulatedRuntime()
    handle = runtime.start(TaskSpec(id=5, image="sim", command="", kind=kind, port=8123,
                                    env={"HETEROFLOW_SIM_SECONDS": "0.3"}))
    assert wait_for_exit(runtime, handle) == 0
    output = runtime.read_output(handle)
    assert expected in output and output.endswith(b"finished\n")
    assert runtime.read_output(handle) == b""


def test_a_stopped_simulated_task_says_so_in_its_output(tmp_path):
    runtime = SimulatedRuntime(tmp_path)
    handle = runtime.start(TaskSpec(id=6, image="sim", command="", kind="training"))
    output = b""
    deadline = time.monotonic() + 10
    while not output and time.monotonic() < deadline:  # once it prints, its signal handler is in place
        time.sleep(0.02)
        output = runtime.read_output(handle)
    runtime.stop(handle, 10)
    wait_for_exit(runtime, handle)
    assert b"received SIGTERM" in runtime.read_output(handle)
    runtime.release(handle)
    assert list(tmp_path.iterdir()) == []


def test_without_a_state_directory_nothing_is_adopted():
    assert SimulatedRuntime().adopt() == {}


def test_a_recorded_pid_now_used_by_another_process_is_not_adopted(tmp_path):
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (tmp_path / "11.pid").write_text(str(stranger.pid))
        assert SimulatedRuntime(tmp_path).adopt() == {}
        assert stranger.poll() is None and not (tmp_path / "11.pid").exists()
    finally:
        stranger.kill()
        stranger.wait()
