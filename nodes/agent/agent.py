"""The node agent loop: heartbeat, fetch work, claim and start tasks, stop tasks, report exits.

Expected JSON shapes (the agent routes of /api/schema/docs/):

- ``POST /api/v1/agent/heartbeat`` ``{cpu_percent, memory_used_mb, gpus: [Card.to_json()], labels, running: [ids],
  readiness: [{task, ready, failures}], metrics: [{task, value}]}`` (the latest probe of each replica that declares
  one, and the autoscaling metric of each autoscaled replica, design §17.2)
  -> ``{kill: [ids]}``: containers the server no longer expects here (the task was lost, settled or stopped
  elsewhere); they are killed without a report
- ``GET /api/v1/agent/work`` -> ``{start: [{id, image, command, gpus, port, env, labels?, gpu_type?, readiness?}],
  stop: [{id, status, grace_seconds}], probe: [{id, port, node_address, readiness}]}`` where ``status`` is
  ``stopping`` or ``preempting``; ``probe`` (asked with ``?probes=1`` after adopting tasks) lists the running
  replicas to probe
- ``POST /api/v1/agent/tasks/{id}/status`` ``{from, to, reason?}`` -> 200 (won the CAS) or 409 (lost it)
- ``POST /api/v1/agent/tasks/{id}/logs`` the task's output since the last batch, as the raw body (design §16.4)

A start item is claimed (``scheduled -> running``) before anything runs, and only a 200 starts the container: a
409 means another claimant won and the item is dropped silently. Reports the server could not take are kept and
sent again first thing in the next step, so an outage delays task outcomes but never loses them. Each step ships
the output the running tasks printed since the last one; a task that ended has its last output shipped before its
status is reported, and only then is its container released. On start the
agent adopts what its runtime still runs from an earlier life (design §15.4) instead of forgetting it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from .client import AgentClient, AgentRequestError, ServerUnavailable
from .detectors import Card, CommandRunner, detect_all, run_command
from .health import OK, HealthReport, read_health
from .host import CpuSampler, memory_used_mb
from .log_shipping import LogShipper
from .replica_metrics import GPU_UTILIZATION, gpu_utilization, prometheus_value
from .runtime import Readiness, Runtime, TaskSpec
from nodes.artifacts_label import IMAGES_LABEL, MODELS_LABEL, encode_names

from .topology import LABELLED_CARD_TYPE, TOPOLOGY_LABEL, GpuTopology, encode_label, parse_nvidia_smi_topo

logger = logging.getLogger(__name__)

GPU_TYPE_LABEL = "heteroflow.io/gpu-type"
# Where a stop item goes once its container is down: a user stop ends the task, a preemption requeues it.
STOP_TRANSITIONS = {"stopping": "stopped", "preempting": "pending"}
ENDED_BY_ITSELF = "preempted: the container ended by itself before its stop took effect"
# What a runtime raises when a container cannot be started or stopped; never allowed to kill a worker thread.
RUNTIME_ERRORS = (OSError, RuntimeError, ValueError, subprocess.SubprocessError)
# The grace of a stop item that names none (a server from before design §17.1), and of a kill the server orders.
DEFAULT_GRACE_SECONDS = 10


@dataclasses.dataclass
class ProbeState:
    """A replica's readiness probes (design §17.2): the latest outcome and the failures in a row since a success."""

    spec: TaskSpec
    next_at: float
    ready: bool | None = None
    failures: int = 0

    def report(self, task_id: int) -> dict[str, Any]:
        return {"task": task_id, "ready": bool(self.ready), "failures": self.failures}


@dataclasses.dataclass(frozen=True)
class StatusReport:
    task_id: int
    from_status: str
    to_status: str
    reason: str | None = None


@dataclasses.dataclass
class _Stopping:
    """A container asked to stop: killed once the agent's clock passes `kill_at`; `report` is sent once it is down
    (None for a kill the server ordered: the task has moved on, nothing is reported)."""

    handle: Any
    kill_at: float
    report: StatusReport | None


def default_pool_size(cores: int | None = None) -> int:
    return max(2, min(32, (cores or os.cpu_count() or 1) // 2))


def probe_nvidia_topology(runner: CommandRunner = run_command) -> GpuTopology | None:
    """``nvidia-smi topo -m`` parsed, or ``None`` where it is missing, fails or prints no GPU matrix."""
    try:
        return parse_nvidia_smi_topo(runner(["nvidia-smi", "topo", "-m"]))
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        logger.debug("no NVLink topology: %s", exc)
        return None


# The heartbeat API's limits on a card's errors (scheduling.api.agent_apis): the newest ones, cut to fit.
ERRORS_SENT_PER_CARD = 16
_CODE_MAX, _MESSAGE_MAX = 64, 500


def read_card_health(cards: Sequence[Card]) -> dict[str, HealthReport]:
    """Each present vendor's card health from its tool (design §17.3); a reader never raises."""
    return read_health({card.type for card in cards}, run_command)


def no_health_reading(cards: Sequence[Card]) -> dict[str, HealthReport]:
    return {}


def _health_json(report: HealthReport | None, index: int) -> dict[str, Any]:
    if report is None:
        return {"health": OK, "errors": []}
    card = report.for_card(index)
    errors = [{"code": error.code[:_CODE_MAX], "message": error.message[:_MESSAGE_MAX], "at": error.at}
              for error in card.errors[-ERRORS_SENT_PER_CARD:]]
    return {"health": card.health, "errors": errors}


class Agent:
    def __init__(self, client: AgentClient, runtime: Runtime,
                 card_source: Callable[[], list[Card]] = detect_all,
                 topology_source: Callable[[], GpuTopology | None] = probe_nvidia_topology,
                 extra_labels: Mapping[str, str] | None = None, workers: int | None = None,
                 cpu_percent: Callable[[], float] | None = None,
                 memory_used: Callable[[], int] = memory_used_mb,
                 clock: Callable[[], float] = time.monotonic,
                 model_source: Callable[[], list[str]] = list,
                 health_source: Callable[[Sequence[Card]], dict[str, HealthReport]] | None = None) -> None:
        self.client = client
        self.runtime = runtime
        self.card_source = card_source
        # Health is read from the vendors' tools that detected the cards; cards from elsewhere (the simulated fleet,
        # tests) have no tool to ask unless a health source comes with them.
        self.health_source = health_source or (read_card_health if card_source is detect_all else no_health_reading)
        self.topology_source = topology_source
        self.extra_labels = dict(extra_labels or {})
        self.cpu_percent = cpu_percent or CpuSampler().percent
        self.memory_used = memory_used
        self.clock = clock
        self.model_source = model_source
        self.pool = ThreadPoolExecutor(max_workers=workers or default_pool_size(), thread_name_prefix="agent")
        self._lock = threading.Lock()
        self._running: dict[int, Any] = {}
        self._stopping: dict[int, _Stopping] = {}
        self._pending_reports: list[StatusReport] = []
        self._probes: dict[int, ProbeState] = {}
        # The replicas of autoscaled groups this process started, whose metric goes out with each heartbeat.
        self._metered: dict[int, TaskSpec] = {}
        self.logs = LogShipper(client)
        self._topology: GpuTopology | None = None
        self._gpu_type: str | None = None
        adopted = self.runtime.adopt()
        if adopted:
            logger.info("adopted %s task(s) left running by an earlier agent: %s", len(adopted),
                        ", ".join(map(str, sorted(adopted))))
        self._running.update(adopted)
        # Adopted replicas whose readiness probe (if any) the server has not told yet.
        self._adopted_unprobed = set(adopted)

    def run_once(self) -> None:
        """One step: resend held reports, heartbeat, fetch and carry out work, then report exited tasks.

        Raises :class:`ServerUnavailable` when the server cannot be reached; exits are still collected and kept.
        """
        try:
            self._ship_held_output()
            self._send_pending_reports()
            reply = self.client.heartbeat(self.heartbeat_payload())
            for future in [self.pool.submit(self._kill, task_id) for task_id in reply.get("kill") or ()]:
                future.result()
            work = self.client.fetch_work(probes=bool(self._adopted_unprobed))
            jobs = [partial(self._start, item) for item in work["start"]]
            jobs += [partial(self._stop, item) for item in work["stop"]]
            for future in [self.pool.submit(job) for job in jobs]:
                future.result()
            if self._adopted_unprobed:
                self._probe_adopted(work.get("probe") or ())
                self._adopted_unprobed.clear()
            self._probe_due()
        finally:
            self._reap()

    def run_forever(self, interval: float, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                self.run_once()
            except ServerUnavailable as exc:
                logger.warning("control plane unavailable: %s", exc)
            except AgentRequestError as exc:
                logger.error("control plane rejected the agent: %s", exc)
            stop.wait(max(0.0, interval - (time.monotonic() - started)))

    def close(self) -> None:
        # Running containers are left alone: they outlive the agent, and the server still tracks them.
        self.pool.shutdown(wait=True)

    def heartbeat_payload(self) -> dict[str, Any]:
        cards = self.card_source()
        topology = self._current_topology()
        if topology is not None:
            cards = [_with_topology_numa(card, topology) for card in cards]
        labels = dict(self.extra_labels)
        if cards:
            # Detection runs in priority order, so the first card's vendor is the node's type on a mixed node.
            self._gpu_type = cards[0].type
            labels[GPU_TYPE_LABEL] = self._gpu_type
        if topology is not None:
            labels[TOPOLOGY_LABEL] = encode_label(topology)
        # What the node holds already (design §17.2, model distribution): the scheduler prefers it for them.
        for label, names in ((MODELS_LABEL, self.model_source()), (IMAGES_LABEL, self._images())):
            if names:
                labels[label] = encode_names(names)
        health = self.health_source(cards) if cards else {}
        return {
            "cpu_percent": self.cpu_percent(),
            "memory_used_mb": self.memory_used(),
            "gpus": [{**card.to_json(), **_health_json(health.get(card.type), card.index)} for card in cards],
            "labels": labels,
            "running": self.running_task_ids(),
            "readiness": self.readiness_reports(),
            "metrics": self.metric_reports(cards),
        }

    def metric_reports(self, cards) -> list[dict[str, Any]]:
        """Each autoscaled replica's metric now (design §17.2); a replica that does not answer is left out."""
        with self._lock:
            metered = [(spec, self._running[task_id]) for task_id, spec in sorted(self._metered.items())
                       if task_id in self._running]
        reports = []
        for spec, handle in metered:
            if spec.metric.metric == GPU_UTILIZATION:
                value = gpu_utilization(cards, spec.gpu_type, spec.gpus)
            else:
                try:
                    text = self.runtime.metrics_text(handle, spec)
                except RUNTIME_ERRORS as exc:
                    logger.warning("task %s: metrics not read: %s", spec.id, exc)
                    text = None
                value = prometheus_value(text, spec.metric.name) if text is not None else None
            if value is not None:
                reports.append({"task": spec.id, "value": max(value, 0.0)})
        return reports

    def _images(self) -> list[str]:
        try:
            return self.runtime.images()
        except RUNTIME_ERRORS as exc:
            logger.warning("images on this node not listed: %s", exc)
            return []

    def readiness_reports(self) -> list[dict[str, Any]]:
        with self._lock:
            return [state.report(task_id) for task_id, state in sorted(self._probes.items())
                    if task_id in self._running and state.ready is not None]

    def _probe_due(self) -> None:
        """Probe each replica whose period came round; a probe's outcome goes out with the next heartbeat."""
        now = time.monotonic()
        with self._lock:
            for task_id in set(self._probes) - set(self._running):
                del self._probes[task_id]
            for task_id in set(self._metered) - set(self._running):
                del self._metered[task_id]
            due = [(task_id, state, self._running[task_id]) for task_id, state in self._probes.items()
                   if state.next_at <= now]
        for (task_id, state, _handle), ready in zip(due, self.pool.map(lambda entry: self._probe(*entry), due)):
            state.ready = ready
            state.failures = 0 if ready else state.failures + 1
            state.next_at = now + state.spec.readiness.period_seconds

    def _probe_adopted(self, items) -> None:
        """Probe the running replicas this process did not start (adopted after a restart) as the server says."""
        with self._lock:
            for item in items:
                try:
                    task_id = int(item["id"])
                    if task_id in self._running and task_id not in self._probes:
                        spec = TaskSpec(id=task_id, image="", command="", port=item.get("port"),
                                        node_address=str(item.get("node_address") or ""),
                                        readiness=Readiness.from_item(item["readiness"]))
                        self._probes[task_id] = ProbeState(spec, next_at=time.monotonic())
                except (KeyError, TypeError, ValueError) as exc:
                    logger.error("unusable probe item %r: %s", item, exc)

    def _probe(self, task_id: int, state: ProbeState, handle: Any) -> bool:
        try:
            return self.runtime.probe(handle, state.spec)
        except RUNTIME_ERRORS as exc:
            logger.warning("task %s: readiness probe not run: %s", task_id, exc)
            return False

    def running_task_ids(self) -> list[int]:
        """Every container here, those still stopping included."""
        with self._lock:
            return sorted({*self._running, *self._stopping})

    def _current_topology(self) -> GpuTopology | None:
        # Links and NUMA placement only change with the hardware: probe until it works once, then reuse it.
        if self._topology is None:
            self._topology = self.topology_source()
        return self._topology

    def _start(self, item: Mapping[str, Any]) -> None:
        try:
            spec = TaskSpec.from_work_item(item, default_gpu_type=self._gpu_type)
        except (KeyError, TypeError, ValueError) as exc:
            logger.error("unusable start item %r: %s", item, exc)
            return
        try:
            won = self.client.report_status(spec.id, "scheduled", "running")
        except (ServerUnavailable, AgentRequestError) as exc:
            logger.warning("task %s: claim not sent, leaving it to the server: %s", spec.id, exc)
            return
        if not won:
            return
        try:
            handle = self.runtime.start(spec)
        except RUNTIME_ERRORS as exc:
            logger.error("task %s: could not start: %s", spec.id, exc)
            self._report(StatusReport(spec.id, "running", "failed", f"start failed: {exc}"))
            return
        with self._lock:
            self._running[spec.id] = handle
            if spec.readiness is not None:
                self._probes[spec.id] = ProbeState(spec, next_at=time.monotonic())
            if spec.metric is not None:
                self._metered[spec.id] = spec

    def _stop(self, item: Mapping[str, Any]) -> None:
        try:
            task_id, status = int(item["id"]), str(item["status"])
            grace = max(0, int(item.get("grace_seconds", DEFAULT_GRACE_SECONDS)))
        except (KeyError, TypeError, ValueError) as exc:
            logger.error("unusable stop item %r: %s", item, exc)
            return
        if status not in STOP_TRANSITIONS:
            logger.error("task %s: cannot stop a task in state %r", task_id, status)
            return
        with self._lock:
            if task_id in self._stopping:
                return  # listed again while its grace runs
            handle = self._running.pop(task_id, None)
        exit_code = self.runtime.poll(handle) if handle is not None and status == "preempting" else None
        if exit_code is not None:
            # It ended by itself before its stop took effect (design §16.1): a victim is never `succeeded`; a clean
            # exit settles as the preemption with its exit code on the timeline, a crash stays a failure.
            self._last_output(task_id, handle)
            self._report(StatusReport(task_id, status, "pending", f"{ENDED_BY_ITSELF}, exit code 0")
                         if exit_code == 0 else StatusReport(task_id, status, "failed", f"exit code {exit_code}"))
            return
        report = StatusReport(task_id, status, STOP_TRANSITIONS[status])
        if handle is None:
            self._report(report)
            return
        if not self._begin_stop(task_id, handle, grace, report):
            # Keep tracking it and report nothing: the server lists the stop again and we retry.
            with self._lock:
                self._running[task_id] = handle

    def _kill(self, task_id: Any) -> None:
        """Stop a container the server no longer expects; nothing is reported, the task has moved on already."""
        try:
            task_id = int(task_id)
        except (TypeError, ValueError):
            logger.error("unusable kill item %r", task_id)
            return
        # The task is no longer this node's: the server would refuse its output.
        self.logs.discard(task_id)
        with self._lock:
            stopping = self._stopping.get(task_id)
            if stopping is not None:
                stopping.report = None  # settled meanwhile (the watchdog): its report would lose the CAS
                return
            handle = self._running.pop(task_id, None)
        if handle is not None and not self._begin_stop(task_id, handle, DEFAULT_GRACE_SECONDS, None):
            with self._lock:
                self._running[task_id] = handle

    def _begin_stop(self, task_id: int, handle: Any, grace: int, report: StatusReport | None) -> bool:
        try:
            self.runtime.stop(handle, grace)
        except RUNTIME_ERRORS as exc:
            logger.error("task %s: could not stop: %s", task_id, exc)
            return False
        with self._lock:
            self._stopping[task_id] = _Stopping(handle, self.clock() + grace, report)
        return True

    def _finish_stops(self) -> None:
        """Containers asked to stop that are down now, or whose grace ran out (killed here), are done with: their
        last output shipped and the stop reported (a killed one's released quietly)."""
        with self._lock:
            stopping = list(self._stopping.items())
        for task_id, stop in stopping:
            if self.runtime.poll(stop.handle) is None:
                if self.clock() < stop.kill_at:
                    continue
                try:
                    self.runtime.kill(stop.handle)
                except RUNTIME_ERRORS as exc:
                    logger.error("task %s: could not kill: %s", task_id, exc)
                    continue
            with self._lock:
                del self._stopping[task_id]
            if stop.report is None:
                self.logs.discard(task_id)
                self._release(task_id, stop.handle)
                logger.warning("task %s: killed, the control plane no longer places it here", task_id)
                continue
            self._last_output(task_id, stop.handle)
            self._report(stop.report)

    def _reap(self) -> None:
        self._finish_stops()
        with self._lock:
            running = list(self._running.items())
        ended = []
        for task_id, handle in running:
            exit_code = self.runtime.poll(handle)
            self.logs.add(task_id, self._read_output(task_id, handle))
            if exit_code is not None:
                ended.append((task_id, handle, exit_code))
        self._ship_held_output()
        for task_id, handle, exit_code in ended:
            with self._lock:
                del self._running[task_id]
            self._release(task_id, handle)
            if exit_code == 0:
                self._report(StatusReport(task_id, "running", "succeeded"))
            else:
                self._report(StatusReport(task_id, "running", "failed", f"exit code {exit_code}"))

    def _ship_held_output(self) -> None:
        """Output held through an outage goes before the held status reports; a log route that keeps failing
        delays neither the reports nor the heartbeat."""
        try:
            self.logs.flush()
        except ServerUnavailable as exc:
            logger.warning("task output held for later: %s", exc)

    def _read_output(self, task_id: int, handle: Any) -> bytes:
        try:
            return self.runtime.read_output(handle)
        except RUNTIME_ERRORS as exc:
            logger.warning("task %s: output not read: %s", task_id, exc)
            return b""

    def _last_output(self, task_id: int, handle: Any) -> None:
        """Ship what the ended task printed last (held if the server is away: it goes out before the status
        report, which is held then too), then release what the runtime keeps of it."""
        self.logs.add(task_id, self._read_output(task_id, handle))
        try:
            self.logs.flush([task_id])
        except ServerUnavailable as exc:
            logger.warning("task %s: last output held for later: %s", task_id, exc)
        self._release(task_id, handle)

    def _release(self, task_id: int, handle: Any) -> None:
        try:
            self.runtime.release(handle)
        except RUNTIME_ERRORS as exc:
            logger.warning("task %s: not released: %s", task_id, exc)

    def _report(self, report: StatusReport) -> None:
        try:
            self._send(report)
        except ServerUnavailable as exc:
            logger.warning("task %s: report %s -> %s held for later: %s", report.task_id, report.from_status,
                           report.to_status, exc)
            with self._lock:
                self._pending_reports.append(report)

    def _send_pending_reports(self) -> None:
        with self._lock:
            pending, self._pending_reports = self._pending_reports, []
        for position, report in enumerate(pending):
            try:
                self._send(report)
            except ServerUnavailable:
                with self._lock:
                    self._pending_reports[:0] = pending[position:]
                raise

    def _send(self, report: StatusReport) -> None:
        try:
            # A lost CAS (409) needs nothing further: the server already moved the task on (e.g. its watchdog).
            self.client.report_status(report.task_id, report.from_status, report.to_status, report.reason)
        except AgentRequestError as exc:
            logger.error("task %s: report %s -> %s rejected: %s", report.task_id, report.from_status,
                         report.to_status, exc)


def _with_topology_numa(card: Card, topology: GpuTopology) -> Card:
    if card.type != LABELLED_CARD_TYPE or card.numa is not None or card.index not in topology.numa:
        return card
    return dataclasses.replace(card, numa=topology.numa[card.index])

