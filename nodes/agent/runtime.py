"""How the agent runs a task: in a Docker container, or as a stand-in process for the simulated fleet.

Both runtimes share one interface (:class:`Runtime`): ``start(spec) -> handle``, ``poll(handle) -> exit code or
None while running``, ``stop(handle, grace_seconds)`` (asks the task to stop — SIGTERM — and returns at once; the
agent polls, and once the grace ran out on its clock), ``kill(handle)`` (SIGKILL, returning once it is down),
``read_output(handle) -> bytes`` (what the task
printed since the last call: the log the agent ships, design §16.4), ``release(handle)`` (free what is left of an
ended task — its container, its records — once its last output is read) and ``adopt() -> {task id: handle}``:
what an earlier agent process on this host started and left running, so that a restarted agent carries on with it
(design §15.4). Docker finds its containers by name; the simulated runtime keeps a state directory.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .port_guard import PortGuard
from nodes.artifacts_label import image_name

logger = logging.getLogger(__name__)

SIM_SECONDS_KEY = "HETEROFLOW_SIM_SECONDS"
SIM_EXIT_CODE_KEY = "HETEROFLOW_SIM_EXIT_CODE"
# How long the stand-in takes to wind down after SIGTERM (a checkpoint being saved); a grace shorter than this ends
# in the kill.
SIM_STOP_SECONDS_KEY = "HETEROFLOW_SIM_STOP_SECONDS"

# How long a simulated replica takes to answer its readiness probe (`inf`: never), and when it stops answering.
SIM_READY_SECONDS_KEY = "HETEROFLOW_SIM_READY_SECONDS"
SIM_UNREADY_AFTER_KEY = "HETEROFLOW_SIM_UNREADY_AFTER_SECONDS"
DEFAULT_SIM_READY_SECONDS = 2.0
# The simulated load (design §17.2): a file holding the load a group receives in all (a number, rewritten by
# whatever drives it: a test, the demo, `bench_autoscale`); each stand-in serving from it reports an even share on
# its `/metrics` under the group's metric name.
SIM_LOAD_FILE_KEY = "HETEROFLOW_SIM_LOAD_FILE"
# A probe that takes longer than this is a failed one (kube's default timeoutSeconds).
PROBE_TIMEOUT_SECONDS = 1.0
DEFAULT_SIM_SECONDS = 30.0
DEFAULT_SIM_EXIT_CODE = 0
# Docker's own exit status for "the container could not be run"; reported when the container vanished under us.
CONTAINER_GONE_EXIT_CODE = 125
SIMULATED_WORKLOAD = Path(__file__).with_name("simulated_workload.py")


@dataclass(frozen=True)
class Readiness:
    """How to tell that a replica serves (design §17.2): an HTTP GET of `path` on `port` answered 2xx or 3xx."""

    path: str
    port: int | None
    period_seconds: float = 10.0
    failure_threshold: int = 3

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None) -> Readiness | None:
        if not item:
            return None
        return cls(path=str(item["path"]), port=int(item["port"]) if item.get("port") is not None else None,
                   period_seconds=float(item.get("period_seconds") or 10),
                   failure_threshold=int(item.get("failure_threshold") or 3))


def http_probe(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_SECONDS) as response:
            return 200 <= response.status < 400
    except (urllib.error.URLError, OSError, ValueError):
        return False


def http_text(url: str) -> str | None:
    """The body of a GET, or None when it did not answer 2xx in time."""
    try:
        with urllib.request.urlopen(url, timeout=PROBE_TIMEOUT_SECONDS) as response:
            return response.read(1 << 20).decode("utf-8", "replace") if 200 <= response.status < 300 else None
    except (urllib.error.URLError, OSError, ValueError):
        return None


@dataclass(frozen=True)
class Metric:
    """The autoscaling metric the agent reports of a replica (design §17.2): `gpu_utilization` from the vendor
    tool, the others as `name` in the replica's Prometheus `/metrics`."""

    metric: str
    name: str

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None) -> Metric | None:
        if not item:
            return None
        return cls(metric=str(item["metric"]), name=str(item.get("name") or item["metric"]))


@dataclass(frozen=True)
class TaskSpec:
    """A task the server asked this node to start (one item of ``GET /api/v1/agent/work`` ``start``)."""

    id: int
    image: str
    command: str
    gpus: tuple[int, ...] = ()
    port: int | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)
    gpu_type: str | None = None
    # The task's type (batch, training, inference): what the simulated runtime's stand-in prints.
    kind: str = "batch"
    # What the container is confined to (design §16.5): its tenant's network, the CPU and memory the task booked
    # (0: not asked, no limit), and the host address its port is published on (the node's internal address).
    tenant: int | None = None
    cpu_cores: float = 0.0
    memory_mb: int = 0
    node_address: str = ""
    readiness: Readiness | None = None
    metric: Metric | None = None

    @classmethod
    def from_work_item(cls, item: Mapping[str, Any], default_gpu_type: str | None = None) -> TaskSpec:
        # Cards may come as bare indexes or as card objects with an "index"; both name the same host cards.
        gpus = tuple(int(card["index"]) if isinstance(card, Mapping) else int(card) for card in item.get("gpus") or ())
        return cls(
            id=int(item["id"]),
            image=str(item["image"]),
            command=str(item.get("command") or ""),
            gpus=gpus,
            port=int(item["port"]) if item.get("port") is not None else None,
            env={str(key): str(value) for key, value in (item.get("env") or {}).items()},
            labels={str(key): str(value) for key, value in (item.get("labels") or {}).items()},
            gpu_type=item.get("gpu_type") or default_gpu_type,
            kind=str(item.get("type") or "batch"),
            tenant=int(item["tenant"]) if item.get("tenant") is not None else None,
            cpu_cores=float(item.get("cpu_cores") or 0),
            memory_mb=int(item.get("memory_mb") or 0),
            node_address=str(item.get("node_address") or ""),
            readiness=Readiness.from_item(item.get("readiness")),
            metric=Metric.from_item(item.get("metric")),
        )


class Runtime(Protocol):
    def start(self, spec: TaskSpec) -> Any: ...

    def poll(self, handle: Any) -> int | None: ...

    def stop(self, handle: Any, grace_seconds: int) -> None: ...

    def kill(self, handle: Any) -> None: ...

    def read_output(self, handle: Any) -> bytes: ...

    def release(self, handle: Any) -> None: ...

    def adopt(self) -> dict[int, Any]: ...

    def probe(self, handle: Any, spec: TaskSpec) -> bool: ...

    def metrics_text(self, handle: Any, spec: TaskSpec) -> str | None:
        """The replica's Prometheus `/metrics` text, None when it does not answer."""
        ...

    def images(self) -> list[str]: ...


@dataclass(frozen=True)
class DeviceAccess:
    """How a vendor's cards reach a container and which variable tells the task which cards it owns.

    With per-card device flags (or ``--gpus``) the container sees only its cards, renumbered from 0, so the
    visible-devices variable lists ``0..n-1``. With shared device nodes only (``/dev/kfd``, ``/dev/dri``, ...) the
    container sees every card and the variable must name the host indexes the scheduler assigned.
    """

    visible_devices_env: str
    per_card_devices: tuple[str, ...] = ()
    shared_devices: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    uses_gpus_flag: bool = False

    def isolates_cards(self) -> bool:
        return self.uses_gpus_flag or bool(self.per_card_devices)

    def visible_devices(self, cards: Sequence[int]) -> str:
        indexes = range(len(cards)) if self.isolates_cards() else cards
        return ",".join(str(index) for index in indexes)

    def docker_args(self, cards: Sequence[int]) -> list[str]:
        args: list[str] = []
        if self.uses_gpus_flag:
            # The inner quotes are needed: docker reads --gpus as CSV, so "device=0,1" must stay one field.
            args += ["--gpus", f'"device={",".join(str(card) for card in cards)}"']
        for card in cards:
            for template in self.per_card_devices:
                args += ["--device", template.format(index=card)]
        for device in self.shared_devices:
            args += ["--device", device]
        return args + list(self.extra_args)


DEVICE_ACCESS: dict[str, DeviceAccess] = {
    "nvidia": DeviceAccess("CUDA_VISIBLE_DEVICES", uses_gpus_flag=True),
    "ascend": DeviceAccess("ASCEND_VISIBLE_DEVICES", ("/dev/davinci{index}",),
                           ("/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"),
                           ("-v", "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro")),
    "musa": DeviceAccess("MTHREADS_VISIBLE_DEVICES", ("/dev/mtgpu.{index}",), ("/dev/dri",)),
    "hygon": DeviceAccess("HIP_VISIBLE_DEVICES", (), ("/dev/kfd", "/dev/dri"), ("--group-add", "video")),
    "metax": DeviceAccess("MACA_VISIBLE_DEVICES", (), ("/dev/dri", "/dev/mxcd"), ("--group-add", "video")),
    "enflame": DeviceAccess("TOPS_VISIBLE_DEVICES", ("/dev/gcu{index}",)),
    "iluvatar": DeviceAccess("CUDA_VISIBLE_DEVICES", ("/dev/iluvatar{index}",)),
    # No public device-node layout: the card choice is left to Biren's container runtime hook.
    "biren": DeviceAccess("BR_VISIBLE_DEVICES"),
    "cambricon": DeviceAccess("MLU_VISIBLE_DEVICES", ("/dev/cambricon_dev{index}",), ("/dev/cambricon_ctl",)),
    "kunlun": DeviceAccess("XPU_VISIBLE_DEVICES", ("/dev/xpu{index}",), ("/dev/xpuctrl",)),
}


# Vendors whose runtime cannot hide the other cards from a container: a node of theirs holds one tenant's tasks at
# a time (design §16.5; the scheduler's `SingleTenantRuntime` filter).
CARDS_VISIBLE_TO_EVERY_CONTAINER = frozenset(gpu_type for gpu_type, access in DEVICE_ACCESS.items()
                                             if not access.isolates_cards())

CONTAINER_PREFIX = "heteroflow-task-"
TENANT_NETWORK_PREFIX = "heteroflow-tenant-"
# Processes per container: enough for data loaders and compilers, not for a fork bomb that starves the node.
PIDS_LIMIT = 4096
LOOPBACK = "127.0.0.1"
# The bridge of docker's default network, where a task without a tenant runs.
DEFAULT_BRIDGE = "docker0"
_CONTAINER_NAME = re.compile(rf"^{CONTAINER_PREFIX}(\d+)$")
# Storage drivers that take `--storage-opt size=` (a quota on the container's writable layer); overlay2 only on an
# xfs mounted with `pquota` (which `docker info` does not show: the daemon's refusal of the first run tells).
QUOTA_DRIVERS = frozenset({"btrfs", "zfs", "devicemapper", "windowsfilter"})
QUOTA_ON_XFS_DRIVERS = frozenset({"overlay2"})


@dataclass(frozen=True)
class ContainerLimits:
    """What a container may write on the node (design §16.5): its output, kept by docker's `local` log driver in
    at most `log_max_files` files of `log_max_size` (the agent ships it to the server as it goes), and its writable
    layer, `disk_gb` at most where the storage driver can enforce it (0: no limit)."""

    log_max_size: str = "10m"
    log_max_files: int = 3
    disk_gb: int = 100

    def log_args(self) -> list[str]:
        return ["--log-driver", "local", "--log-opt", f"max-size={self.log_max_size}",
                "--log-opt", f"max-file={self.log_max_files}"]

    def disk_args(self) -> list[str]:
        return ["--storage-opt", f"size={self.disk_gb}G"] if self.disk_gb > 0 else []


def container_name(task_id: int) -> str:
    return f"{CONTAINER_PREFIX}{task_id}"


def tenant_network(tenant: int) -> str:
    return f"{TENANT_NETWORK_PREFIX}{tenant}"


def docker_run_argv(spec: TaskSpec, *, publish_address: str | None = None, limits: ContainerLimits = ContainerLimits(),
                    disk_quota: bool = False) -> list[str]:
    """The exact ``docker run`` command line for ``spec`` (pure, so it is testable without a Docker engine).

    The container is confined (design §16.5): the task's CPU and memory as limits (swap included), a process
    limit, no capabilities, no privilege gain through setuid, bounded output and (with `disk_quota`, where the
    storage driver supports one) a bounded writable layer, its tenant's own network, and its port published on
    `publish_address` — the node's internal address (loopback without one), never every interface unless the
    agent's operator asks for it (``--publish-address 0.0.0.0``)."""
    argv = ["docker", "run", "-d", "--name", container_name(spec.id),
            "--pids-limit", str(PIDS_LIMIT), "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            *limits.log_args(), *(limits.disk_args() if disk_quota else ())]
    if spec.cpu_cores > 0:
        argv += ["--cpus", f"{spec.cpu_cores:g}"]
    if spec.memory_mb > 0:
        argv += ["--memory", f"{spec.memory_mb}m", "--memory-swap", f"{spec.memory_mb}m"]
    if spec.tenant is not None:
        argv += ["--network", tenant_network(spec.tenant)]
    access = None
    if spec.gpus:
        if spec.gpu_type not in DEVICE_ACCESS:
            raise ValueError(f"task {spec.id}: cannot hand cards of GPU type {spec.gpu_type!r} to a container")
        access = DEVICE_ACCESS[spec.gpu_type]
        argv += ["-e", f"{access.visible_devices_env}={access.visible_devices(spec.gpus)}"]
    for key, value in spec.env.items():
        argv += ["-e", f"{key}={value}"]
    if spec.port is not None:
        argv += ["-p", f"{_bracketed(published_on(spec, publish_address))}:{spec.port}:{spec.port}"]
    if access is not None:
        argv += access.docker_args(spec.gpus)
    return argv + [spec.image, "sh", "-c", spec.command]


def published_on(spec: TaskSpec, publish_address: str | None) -> str:
    return publish_address or spec.node_address or LOOPBACK


def _bracketed(address: str) -> str:
    """Docker reads an IPv6 host address in `-p` only in brackets."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


DockerCommand = Callable[..., subprocess.CompletedProcess]


def run_docker(argv: Sequence[str], *, binary: bool = False) -> subprocess.CompletedProcess:
    """Run a command of the host (the docker CLI, iptables); never raises for a non-zero exit (callers read
    ``returncode``). Its output is
    bytes when `binary`, else text in which a byte that is not UTF-8 reads as U+FFFD rather than raising."""
    if binary:
        return subprocess.run(list(argv), capture_output=True, check=False)
    return subprocess.run(list(argv), capture_output=True, text=True, errors="replace", check=False)


class DockerRuntime:
    """Tasks as detached Docker containers named ``heteroflow-task-<id>``; the handle is that name."""

    def __init__(self, docker: DockerCommand = run_docker, *, publish_address: str | None = None,
                 limits: ContainerLimits = ContainerLimits()) -> None:
        self.docker = docker
        self.publish_address = publish_address
        self.limits = limits
        # Each tenant network created, with its bridge interface (None when docker did not say).
        self._networks: dict[str, str | None] = {}
        self.port_guard = PortGuard(docker)
        # Per container being stopped, the thread waiting on its `docker stop -t N`.
        self._stoppers: dict[str, threading.Thread] = {}
        # Per container, the time up to which its output was read (`docker logs --until`), the next `--since`.
        self._output_read_until: dict[str, str] = {}
        # Whether the storage driver takes a writable-layer quota; None until the daemon answered.
        self._disk_quota: bool | None = None if limits.disk_gb > 0 else False

    def start(self, spec: TaskSpec) -> str:
        bridge: str | None = DEFAULT_BRIDGE
        if spec.tenant is not None:
            bridge = self._ensure_network(tenant_network(spec.tenant))
        if spec.port is not None:
            # Before the port exists: no moment in which another tenant's container reaches it.
            self.port_guard.admit_only(task_name=container_name(spec.id), port=spec.port, bridge=bridge,
                                       ipv6=":" in published_on(spec, self.publish_address))
        if self._disk_quota is None:
            self._disk_quota = self._storage_driver_takes_a_quota()
        result = self.docker(docker_run_argv(spec, publish_address=self.publish_address, limits=self.limits,
                                             disk_quota=bool(self._disk_quota)))
        if result.returncode != 0 and self._disk_quota and "storage-opt" in result.stderr:
            # overlay2 on an xfs without `pquota`: the daemon refuses before it creates the container.
            logger.warning("containers' writable layers are not bounded on this node: %s", result.stderr.strip())
            self._disk_quota = False
            result = self.docker(docker_run_argv(spec, publish_address=self.publish_address, limits=self.limits))
        if result.returncode != 0:
            self.port_guard.forget(container_name(spec.id))
            raise RuntimeError(f"docker run failed ({result.returncode}): {result.stderr.strip()}")
        return container_name(spec.id)

    def _storage_driver_takes_a_quota(self) -> bool | None:
        """From `docker info`: the storage driver, and for overlay2 the filesystem under it. None when the daemon
        did not answer (asked again at the next start)."""
        result = self.docker(["docker", "info", "--format", "{{.Driver}} {{json .DriverStatus}}"])
        if result.returncode != 0:
            return None
        driver, _, status = result.stdout.strip().partition(" ")
        try:
            backing = dict((pair[0], pair[1]) for pair in json.loads(status or "null") or () if len(pair) == 2)
        except (ValueError, TypeError):
            backing = {}
        takes = driver in QUOTA_DRIVERS or (driver in QUOTA_ON_XFS_DRIVERS
                                            and backing.get("Backing Filesystem") == "xfs")
        if not takes:
            logger.warning("containers' writable layers are not bounded on this node: the %s storage driver%s takes "
                           "no size quota (docs/operations.md)", driver or "unknown",
                           f" on {backing['Backing Filesystem']}" if backing.get("Backing Filesystem") else "")
        return takes

    def _ensure_network(self, network: str) -> str | None:
        """A bridge network per tenant: containers of different tenants on one node cannot reach each other. Its
        bridge interface: the one docker names after the network's id unless the network names its own."""
        if network in self._networks:
            return self._networks[network]
        result = self.docker(["docker", "network", "create", "--driver", "bridge", network])
        if result.returncode != 0 and "already exists" not in result.stderr:
            raise RuntimeError(f"docker network create failed ({result.returncode}): {result.stderr.strip()}")
        inspected = self.docker(["docker", "network", "inspect", "-f",
                                 '{{.Id}} {{index .Options "com.docker.network.bridge.name"}}', network])
        network_id, _, named = inspected.stdout.strip().partition(" ")
        bridge = None
        if inspected.returncode == 0 and network_id:
            bridge = named.strip() or f"br-{network_id[:12]}"
        self._networks[network] = bridge
        return bridge

    def poll(self, handle: str) -> int | None:
        result = self.docker(["docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", handle])
        if result.returncode != 0:
            if "No such" in result.stderr:
                logger.warning("container %s disappeared", handle)
                return CONTAINER_GONE_EXIT_CODE
            return None  # the daemon is unreachable: the container's fate is unknown, ask again next time
        status, exit_code = result.stdout.split()
        if status not in ("exited", "dead"):
            return None
        return int(exit_code)

    def stop(self, handle: str, grace_seconds: int) -> None:
        """`docker stop -t N`: the daemon sends the container its stop signal and kills it N s later; the command
        waits all that time, so it runs on a thread of its own."""
        stopper = threading.Thread(target=self.docker, args=(["docker", "stop", "-t", str(grace_seconds), handle],),
                                   name=f"stop-{handle}", daemon=True)
        self._stoppers[handle] = stopper
        stopper.start()

    def kill(self, handle: str) -> None:
        self.docker(["docker", "kill", handle])

    def images(self) -> list[str]:
        """The images present on this host (`repository:tag`), for model distribution (design §17.2)."""
        result = self.docker(["docker", "images", "--format", "{{.Repository}}:{{.Tag}}"])
        if result.returncode != 0:
            return []
        return [name for name in result.stdout.split() if not name.endswith(":<none>")]

    def metrics_text(self, handle: str, spec: TaskSpec) -> str | None:
        """GET `/metrics` on the port as published (design §17.2, the autoscaler's metric)."""
        if spec.port is None:
            return None
        return http_text(f"http://{_bracketed(self._published_address(spec))}:{spec.port}/metrics")

    def probe(self, handle: str, spec: TaskSpec) -> bool:
        """GET the readiness path on the port as published (design §17.2)."""
        port = spec.readiness.port or spec.port
        return port is not None and http_probe(
            f"http://{_bracketed(self._published_address(spec))}:{port}{spec.readiness.path}")

    def _published_address(self, spec: TaskSpec) -> str:
        address = self.publish_address or spec.node_address or LOOPBACK
        return LOOPBACK if address in ("0.0.0.0", "::") else address

    def read_output(self, handle: str) -> bytes:
        """The container's output between the last read and now (stdout, then stderr, of that window), as the
        bytes the task printed: whatever they are, the window moves on once docker answered (the server decodes
        with replacement), so no byte can hold a task's log back. An unreachable daemon read nothing, and the
        window is read again next time. An adopted container's is read from its start, so after an agent restart
        some output may be shipped twice."""
        until = f"{time.time():.9f}"
        argv = ["docker", "logs", "--until", until]
        if handle in self._output_read_until:
            argv += ["--since", self._output_read_until[handle]]
        result = self.docker([*argv, handle], binary=True)
        if result.returncode != 0:
            return b""
        self._output_read_until[handle] = until
        return bytes(result.stdout or b"") + bytes(result.stderr or b"")

    def release(self, handle: str) -> None:
        stopper = self._stoppers.pop(handle, None)
        if stopper is not None:
            stopper.join()  # the container is down: its `docker stop` is returning
        # Free the name: a preempted task that is rescheduled here starts a container with the same name.
        self.docker(["docker", "rm", "-f", handle])
        self.port_guard.forget(handle)
        self._output_read_until.pop(handle, None)

    def adopt(self) -> dict[int, str]:
        """The task containers on this host, running or exited but not yet removed (``poll`` reports those, and
        ``release`` removes them)."""
        result = self.docker(["docker", "ps", "-a", "--filter", f"name={CONTAINER_PREFIX}", "--format",
                              "{{.Names}}"])
        if result.returncode != 0:
            raise RuntimeError(f"docker ps failed ({result.returncode}): {result.stderr.strip()}")
        adopted = {}
        for name in result.stdout.split():
            match = _CONTAINER_NAME.match(name)
            if match:
                adopted[int(match.group(1))] = name
        return adopted


@dataclass
class SimulatedProcess:
    """A stand-in process: started by this runtime (``popen``) or adopted from an earlier agent (pid only)."""

    task_id: int
    pid: int
    popen: subprocess.Popen[bytes] | None = None
    # How much of its output file was read (``read_output``).
    output_offset: int = 0


class SimulatedRuntime:
    """A real child process standing in for a container on nodes without GPUs: it prints what a task of its type
    would (``simulated_workload.py``) into ``<task id>.log``, the output the agent ships, and exits.

    Duration, exit code and the time it takes to wind down once stopped come from the task's env or labels
    (``HETEROFLOW_SIM_SECONDS``, ``HETEROFLOW_SIM_EXIT_CODE``, ``HETEROFLOW_SIM_STOP_SECONDS``), env first. With a
    ``state_dir`` each process is recorded there (``<task id>.pid``) and writes its exit code beside it
    (``<task id>.exit``) when it ends, so that an agent started later on the same directory adopts it, learns how it
    ended, and can stop it. Without one, the output files go to a temporary directory removed with the runtime.
    """

    def __init__(self, state_dir: str | Path | None = None) -> None:
        self.state_dir = Path(state_dir) if state_dir is not None else None
        # The images of the tasks it started: a real node keeps what it pulled.
        self._pulled: set[str] = set()
        if self.state_dir is not None:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            self.output_dir = self.state_dir
        else:
            self._temporary_output_dir = tempfile.TemporaryDirectory(prefix="heteroflow-sim-")
            self.output_dir = Path(self._temporary_output_dir.name)

    def images(self) -> list[str]:
        return sorted(self._pulled)

    def start(self, spec: TaskSpec) -> SimulatedProcess:
        if spec.image:
            self._pulled.add(image_name(spec.image))
        seconds = float(_setting(spec, SIM_SECONDS_KEY, DEFAULT_SIM_SECONDS))
        exit_code = int(_setting(spec, SIM_EXIT_CODE_KEY, DEFAULT_SIM_EXIT_CODE))
        stop_seconds = float(_setting(spec, SIM_STOP_SECONDS_KEY, 0))
        argv = [sys.executable, str(SIMULATED_WORKLOAD), "--task-id", str(spec.id), "--kind", spec.kind,
                "--seconds", repr(seconds), "--exit-code", str(exit_code), "--stop-seconds", repr(stop_seconds),
                "--gpus", ",".join(map(str, spec.gpus))]
        if spec.port is not None:
            argv += ["--port", str(spec.port)]
        if spec.kind == "inference":
            self._port_file(spec.id).unlink(missing_ok=True)
            argv += ["--serve-port-file", str(self._port_file(spec.id)),
                     "--ready-after", str(_setting(spec, SIM_READY_SECONDS_KEY, DEFAULT_SIM_READY_SECONDS))]
            unready_after = _setting(spec, SIM_UNREADY_AFTER_KEY, 0)
            if unready_after:
                argv += ["--unready-after", str(unready_after)]
            load_file = _setting(spec, SIM_LOAD_FILE_KEY, "")
            if load_file and spec.metric is not None:
                argv += ["--load-file", str(load_file), "--metric-name", spec.metric.name]
        if self.state_dir is not None:
            argv += ["--exit-file", str(self._exit_file(spec.id))]
        with self._output_file(spec.id).open("wb") as output:
            popen = subprocess.Popen([*argv, container_name(spec.id)], stdout=output, stderr=subprocess.STDOUT)
        if self.state_dir is not None:
            self._pid_file(spec.id).write_text(str(popen.pid))
        return SimulatedProcess(spec.id, popen.pid, popen)

    def poll(self, handle: SimulatedProcess) -> int | None:
        return handle.popen.poll() if handle.popen is not None else self._adopted_exit_code(handle)

    def read_output(self, handle: SimulatedProcess) -> bytes:
        """What the process printed since the last read (an adopted one's from its start)."""
        try:
            with self._output_file(handle.task_id).open("rb") as output:
                output.seek(handle.output_offset)
                data = output.read()
        except FileNotFoundError:
            return b""
        handle.output_offset += len(data)
        return data

    def release(self, handle: SimulatedProcess) -> None:
        self._forget(handle.task_id)
        self._output_file(handle.task_id).unlink(missing_ok=True)
        self._port_file(handle.task_id).unlink(missing_ok=True)

    def metrics_text(self, handle: SimulatedProcess, spec: TaskSpec) -> str | None:
        """The stand-in's `/metrics`: its share of the simulated load (see simulated_workload.serve)."""
        try:
            port = int(self._port_file(handle.task_id).read_text())
        except (OSError, ValueError):
            return None
        return http_text(f"http://{LOOPBACK}:{port}/metrics")

    def probe(self, handle: SimulatedProcess, spec: TaskSpec) -> bool:
        """GET the readiness path from the stand-in, on the loopback port it chose (see simulated_workload.serve)."""
        try:
            port = int(self._port_file(handle.task_id).read_text())
        except (OSError, ValueError):
            return False  # not serving yet
        return http_probe(f"http://{LOOPBACK}:{port}{spec.readiness.path}")

    def stop(self, handle: SimulatedProcess, grace_seconds: int) -> None:
        # Popen's own signalling sends nothing to a pid it has already reaped (and the system may have reused).
        if handle.popen is not None:
            handle.popen.terminate()
        else:
            _signal(handle.pid, signal.SIGTERM)

    def kill(self, handle: SimulatedProcess) -> None:
        if handle.popen is not None:
            handle.popen.kill()
            handle.popen.wait()
            return
        _signal(handle.pid, signal.SIGKILL)
        while _alive(handle.pid):
            time.sleep(0.01)

    def adopt(self) -> dict[int, SimulatedProcess]:
        """The processes recorded in the state directory that still run or ended unreported."""
        if self.state_dir is None:
            return {}
        adopted = {}
        for pid_file in sorted(self.state_dir.glob("*.pid")):
            task_id = int(pid_file.stem)
            process = SimulatedProcess(task_id, int(pid_file.read_text()))
            if (_alive(process.pid) and _runs_task(process.pid, task_id)) or self._exit_file(task_id).exists():
                adopted[task_id] = process
            else:
                self.release(process)  # killed with the host: nothing left to report
        return adopted

    def _adopted_exit_code(self, handle: SimulatedProcess) -> int | None:
        if _alive(handle.pid):
            return None
        exit_file = self._exit_file(handle.task_id) if self.state_dir else None
        if exit_file is not None and exit_file.exists():
            return int(exit_file.read_text() or CONTAINER_GONE_EXIT_CODE)
        return CONTAINER_GONE_EXIT_CODE

    def _pid_file(self, task_id: int) -> Path:
        return self.state_dir / f"{task_id}.pid"

    def _exit_file(self, task_id: int) -> Path:
        return self.state_dir / f"{task_id}.exit"

    def _port_file(self, task_id: int) -> Path:
        return self.output_dir / f"{task_id}.port"

    def _output_file(self, task_id: int) -> Path:
        return self.output_dir / f"{task_id}.log"

    def _forget(self, task_id: int) -> None:
        if self.state_dir is not None:
            self._pid_file(task_id).unlink(missing_ok=True)
            self._exit_file(task_id).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        # Reap it first if it is our own child (an agent restarted inside one process), or it stays a zombie.
        reaped, _status = os.waitpid(pid, os.WNOHANG)
        if reaped == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _runs_task(pid: int, task_id: int) -> bool:
    """Whether `pid` is the stand-in process of the task (where /proc tells; elsewhere it is taken on trust)."""
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return not Path("/proc/self").exists()
    return container_name(task_id).encode() in command_line


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _setting(spec: TaskSpec, key: str, default: float) -> str | float:
    return spec.env.get(key) or spec.labels.get(key) or default
