"""The node agent's one command line, shared by ``python -m nodes.agent`` and ``manage.py run_agent`` (no Django)."""

from __future__ import annotations

import argparse
import os
import re
import threading
from collections.abc import Mapping
from functools import partial
from typing import Any

from .agent import Agent
from .client import AgentClient
from .detectors import Card, fake_cards_for
from .runtime import ContainerLimits, DockerRuntime, Runtime, SimulatedRuntime

TOKEN_VARIABLE = "HETEROFLOW_NODE_TOKEN"

RUNTIMES: dict[str, type[DockerRuntime] | type[SimulatedRuntime]] = {
    "docker": DockerRuntime, "simulated": SimulatedRuntime,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", required=True, help="control plane base URL, e.g. http://10.0.0.1:8000")
    # The token on the command line is visible to every user of the machine (`ps`): a file or the environment are not.
    parser.add_argument("--token-file", help="file holding the node token returned by /api/v1/agent/register")
    parser.add_argument("--token", help=f"the node token itself (visible in `ps`: prefer --token-file or "
                                        f"{TOKEN_VARIABLE})")
    parser.add_argument("--runtime", choices=sorted(RUNTIMES), default="docker")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between heartbeats")
    parser.add_argument("--state-dir", help="simulated runtime: where it records its processes, so that a "
                                            "restarted agent adopts them")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                        help="extra node label sent with every heartbeat (repeatable), e.g. rdma=true")
    parser.add_argument("--publish-address", help="docker runtime: the host address tasks' ports are published on "
                                                  "(default the node's internal address, else 127.0.0.1; "
                                                  "0.0.0.0 publishes them on every interface)")
    parser.add_argument("--container-log-max-size", default=ContainerLimits.log_max_size, metavar="SIZE",
                        help="docker runtime: each log file of a container at most this big, e.g. 10m "
                             f"(default {ContainerLimits.log_max_size})")
    parser.add_argument("--container-log-max-files", type=int, default=ContainerLimits.log_max_files, metavar="N",
                        help=f"docker runtime: log files kept per container (default {ContainerLimits.log_max_files})")
    parser.add_argument("--container-disk-gb", type=int, default=ContainerLimits.disk_gb, metavar="GB",
                        help="docker runtime: a container's writable layer at most this big where the storage "
                             f"driver takes a quota, 0 for none (default {ContainerLimits.disk_gb})")
    parser.add_argument("--models-dir", help="where model artifacts are kept on this node: each entry's name is "
                                             "reported as a model the node holds (design §17.2)")
    parser.add_argument("--fake-cards", help="report fabricated cards instead of detecting them, "
                                             "TYPE:MODEL:COUNT:MEMORY_MB")


def parse_fake_cards(text: str) -> list[Card]:
    """`nvidia:A100:8:81920` → eight idle A100 cards of 80 GB, for a simulated node."""
    try:
        gpu_type, model, count, memory_mb = text.split(":")
        return fake_cards_for(gpu_type, model, int(count), int(memory_mb))
    except ValueError as exc:
        raise ValueError(f"--fake-cards wants TYPE:MODEL:COUNT:MEMORY_MB, got {text!r} ({exc})") from None


def parse_labels(labels: list[str]) -> dict[str, str]:
    if any("=" not in label for label in labels):
        raise ValueError("--label takes KEY=VALUE")
    return dict(label.split("=", 1) for label in labels)


def node_token(options: Mapping[str, Any], environment: Mapping[str, str] = os.environ) -> str:
    """The node token from --token-file, else the HETEROFLOW_NODE_TOKEN variable, else --token."""
    if options.get("token_file"):
        try:
            with open(options["token_file"], encoding="utf-8") as token_file:
                token = token_file.read().strip()
        except OSError as error:
            raise ValueError(f"--token-file: {error}") from None
        if not token:
            raise ValueError(f"--token-file: {options['token_file']} is empty")
        return token
    token = environment.get(TOKEN_VARIABLE) or options.get("token")
    if not token:
        raise ValueError(f"give the node token: --token-file PATH, {TOKEN_VARIABLE} or --token")
    return token


def container_limits(options: Mapping[str, Any]) -> ContainerLimits:
    """The docker runtime's bounds on what a container writes on the node; ValueError names a bad option."""
    given = {field: options[f"container_{field}"] for field in ("log_max_size", "log_max_files", "disk_gb")
             if options.get(f"container_{field}") is not None}
    limits = ContainerLimits(**given)
    if not re.fullmatch(r"[1-9][0-9]*[kmgKMG]", limits.log_max_size):
        raise ValueError(f"--container-log-max-size takes a size such as 10m, got {limits.log_max_size!r}")
    if limits.log_max_files < 1 or limits.disk_gb < 0:
        raise ValueError("--container-log-max-files takes at least 1, --container-disk-gb at least 0")
    return limits


def agent_from(options: Mapping[str, Any]) -> Agent:
    """The agent the parsed options describe; ValueError names a bad option."""
    extra: dict[str, Any] = {"extra_labels": parse_labels(options["label"])}
    if options["fake_cards"]:
        cards = parse_fake_cards(options["fake_cards"])
        extra.update(card_source=lambda: list(cards), topology_source=lambda: None)
    runtime: Runtime = (SimulatedRuntime(options["state_dir"]) if options["runtime"] == "simulated"
                        else DockerRuntime(publish_address=options.get("publish_address"),
                                           limits=container_limits(options)))
    if options.get("models_dir"):
        extra["model_source"] = partial(models_in, options["models_dir"])
    return Agent(AgentClient(options["server"], node_token(options)), runtime, **extra)


def models_in(directory: str) -> list[str]:
    """The names of the entries of a models directory (none when it cannot be read)."""
    try:
        return sorted(entry.name for entry in os.scandir(directory) if not entry.name.startswith("."))
    except OSError:
        return []


def run(agent: Agent, interval: float, stop: threading.Event) -> None:
    """Heartbeat and work until `stop` is set (or Ctrl-C), then close the agent."""
    try:
        agent.run_forever(interval, stop)
    except KeyboardInterrupt:
        stop.set()
    finally:
        agent.close()
