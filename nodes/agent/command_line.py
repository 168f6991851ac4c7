"""The node agent's one command line, shared by ``python -m nodes.agent`` and ``manage.py run_agent`` (no Django)."""

from __future__ import annotations

import argparse
import os
import re
import socket
import threading
from collections.abc import Mapping
from functools import partial
from typing import Any

import requests

from .agent import Agent
from .client import AgentClient
from .detectors import Card, fake_cards_for
from .host import memory_total_gb
from .runtime import ContainerLimits, DockerRuntime, Runtime, SimulatedRuntime

TOKEN_VARIABLE = "HETEROFLOW_NODE_TOKEN"
JOIN_TOKEN_VARIABLE = "HETEROFLOW_JOIN_TOKEN"
REGISTER_PATH = "/api/v1/agent/register"

RUNTIMES: dict[str, type[DockerRuntime] | type[SimulatedRuntime]] = {
    "docker": DockerRuntime, "simulated": SimulatedRuntime,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", required=True, help="control plane base URL, e.g. http://10.0.0.1:8000")
    # The token on the command line is visible to every user of the machine (`ps`): a file or the environment are not.
    parser.add_argument("--token-file", help="file holding the node token returned by /api/v1/agent/register")
    parser.add_argument("--token", help=f"the node token itself (visible in `ps`: prefer --token-file or "
                                        f"{TOKEN_VARIABLE})")
    parser.add_argument("--join-token-file", help="file holding the cluster's join token: without a node token in "
                                                  "--token-file yet, the agent registers itself with it and keeps "
                                                  f"the node token there (or set {JOIN_TOKEN_VARIABLE})")
    parser.add_argument("--join-token", help=f"the join token itself (visible in `ps`: prefer --join-token-file or "
                                             f"{JOIN_TOKEN_VARIABLE})")
    parser.add_argument("--name", default=socket.gethostname(),
                        help="joining: the node's name (default the host name)")
    parser.add_argument("--internal-ip", help="joining: the node's internal address with its prefix length, "
                                              "e.g. 10.0.3.7/24")
    parser.add_argument("--public-ip", help="joining: the node's public address, if it has one")
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


def join_token(options: Mapping[str, Any], environment: Mapping[str, str] = os.environ) -> str | None:
    """The join token from --join-token-file, else the HETEROFLOW_JOIN_TOKEN variable, else --join-token."""
    if options.get("join_token_file"):
        try:
            with open(options["join_token_file"], encoding="utf-8") as token_file:
                return token_file.read().strip() or None
        except OSError as error:
            raise ValueError(f"--join-token-file: {error}") from None
    return environment.get(JOIN_TOKEN_VARIABLE) or options.get("join_token") or None


def join_cluster(options: Mapping[str, Any], token: str, session: requests.Session | None = None) -> None:
    """Registers this host with the join token and keeps the node token in --token-file (mode 0600), so that a
    restarted agent uses that token and never registers twice."""
    if not options.get("internal_ip"):
        raise ValueError("joining needs --internal-ip, the node's address with its prefix length, e.g. 10.0.3.7/24")
    body = {"name": options["name"], "internal_ip": options["internal_ip"], "public_ip": options.get("public_ip"),
            "cpu_cores": os.cpu_count() or 1, "memory_gb": memory_total_gb()}
    try:
        response = (session or requests).post(options["server"].rstrip("/") + REGISTER_PATH, json=body,
                                              headers={"Authorization": f"Token {token}"}, timeout=30)
    except requests.RequestException as error:
        raise ValueError(f"joining: {options['server']} cannot be reached ({error})") from None
    if response.status_code != 200:
        raise ValueError(f"joining: the control plane answered {response.status_code}: {response.text[:300]}")
    descriptor = os.open(options["token_file"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as token_file:
        token_file.write(response.json()["token"] + "\n")


def _holds_token(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as token_file:
            return bool(token_file.read().strip())
    except FileNotFoundError:
        return False


def node_token(options: Mapping[str, Any], environment: Mapping[str, str] = os.environ) -> str:
    """The node token from --token-file, else the HETEROFLOW_NODE_TOKEN variable, else --token. With a join token,
    no node token given and a --token-file that holds none yet, the agent registers itself first (`join_cluster`)."""
    given = environment.get(TOKEN_VARIABLE) or options.get("token")
    joining = None if given else join_token(options, environment)
    if joining:
        if not options.get("token_file"):
            raise ValueError("joining needs --token-file: where the agent keeps the node token it is given")
        if not _holds_token(options["token_file"]):
            join_cluster(options, joining)
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
