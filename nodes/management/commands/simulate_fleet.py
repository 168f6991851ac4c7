import argparse
import dataclasses
import random
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import requests
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from knox.models import AuthToken

from nodes.agent.agent import Agent
from nodes.agent.client import AgentClient
from nodes.agent.detectors import Card
from nodes.agent.simulated_health import SimulatedCardHealth, card_fault_inject
from nodes.agent.runtime import DEFAULT_SIM_SECONDS, SIM_SECONDS_KEY, SimulatedRuntime, TaskSpec
from nodes.agent.topology import TOPOLOGY_LABEL, decode_label
from nodes.models import Node
from nodes.services import AGENT_LABEL_PREFIX

FLEET_USERNAME = "fleet-simulator"
REGISTER_PATH = "/api/v1/agent/register"
# The fleet usually starts together with the web server: wait this long for it to answer.
SERVER_WAIT_SECONDS = 60.0


class FastForwardRuntime(SimulatedRuntime):
    """Simulated tasks that last `speedup` times less than they say."""

    def __init__(self, speedup: float, state_dir: Path | None = None) -> None:
        super().__init__(state_dir)
        self.speedup = speedup

    def start(self, spec: TaskSpec):
        seconds = float(spec.env.get(SIM_SECONDS_KEY) or spec.labels.get(SIM_SECONDS_KEY) or DEFAULT_SIM_SECONDS)
        env = {**spec.env, SIM_SECONDS_KEY: str(seconds / self.speedup)}
        return super().start(dataclasses.replace(spec, env=env))


@dataclasses.dataclass(frozen=True)
class SimulatedNode:
    """What a fleet member reports: the node's registration figures and its cards as the database knows them."""

    name: str
    internal_ip: str
    public_ip: str | None
    cpu_cores: int
    memory_gb: int
    cards: tuple[Card, ...]
    labels: dict

    @classmethod
    def of(cls, node: Node) -> "SimulatedNode":
        cards = tuple(
            Card(index=gpu.index, uuid=gpu.uuid or f"SIM-{node.name}-{gpu.index}", type=gpu.type, model=gpu.model,
                 memory_total_mb=gpu.memory_total_mb, memory_used_mb=0, utilization=0, temperature=35, numa=gpu.numa)
            for gpu in node.gpus.all()
        )
        return cls(
            name=node.name,
            internal_ip=node.internal_ip or f"10.255.{node.id // 256 % 256}.{node.id % 256}/16",
            public_ip=node.public_ip,
            cpu_cores=node.cpu_cores,
            memory_gb=node.memory_gb,
            cards=cards,
            labels={key: value for key, value in node.labels.items() if key.startswith(AGENT_LABEL_PREFIX)},
        )


def simulated_agent(server: str, token: str, member: SimulatedNode, speedup: float, state_dir: Path,
                    card_fault_rate: float = 0.0) -> Agent:
    """The agent of one fleet member: its cards and labels, stand-in processes recorded under `state_dir`, its
    cards' health from the faults injected there (`nodes.agent.simulated_health`)."""
    topology = decode_label(member.labels.get(TOPOLOGY_LABEL))
    memory_total_mb = member.memory_gb * 1024
    return Agent(
        AgentClient(server, token),
        FastForwardRuntime(speedup, state_dir) if speedup != 1 else SimulatedRuntime(state_dir),
        card_source=lambda: list(member.cards),
        topology_source=lambda: topology,
        extra_labels={key: value for key, value in member.labels.items() if key != TOPOLOGY_LABEL},
        workers=2,
        cpu_percent=lambda: round(random.uniform(5, 35), 1),
        memory_used=lambda: int(memory_total_mb * random.uniform(0.1, 0.4)),
        health_source=SimulatedCardHealth(state_dir, fault_rate=card_fault_rate),
    )


def _shard(text: str) -> tuple[int, int]:
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard takes I/K, for instance 0/2: {text!r}") from None
    if not 0 <= index < count:
        raise argparse.ArgumentTypeError(f"--shard I/K needs 0 <= I < K: {text!r}")
    return index, count


def _card_fault(text: str) -> tuple[str, int]:
    name, _, index = text.rpartition(":")
    if not name or not index.isdigit():
        raise argparse.ArgumentTypeError(f"--card-fault takes NODE:INDEX, for instance gpu-3:1: {text!r}")
    return name, int(index)


def _rate(text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        rate = -1.0
    if not 0 <= rate <= 1:
        raise argparse.ArgumentTypeError(f"--card-fault-rate is a probability from 0 to 1: {text!r}")
    return rate


class Command(BaseCommand):
    help = ("Run one simulated node agent per node in the database (threads), against the real HTTP API: each "
            "registers by node name, heartbeats the node's cards and runs its tasks as stand-in processes.")

    def add_arguments(self, parser):
        parser.add_argument("--server", default="http://127.0.0.1:8000")
        parser.add_argument("--interval", type=float, default=3.0, help="seconds between heartbeats")
        parser.add_argument("--speedup", type=float, nargs="?", const=10.0, default=1.0,
                            help="simulated tasks run this many times faster (10 when given without a value)")
        parser.add_argument("--shard", type=_shard, default=(0, 1), metavar="I/K",
                            help="run the agents of every K-th node by name, starting with the I-th (0-based), so "
                                 "that K fleet processes share the nodes (the soak test stops one at a time)")
        parser.add_argument("--state-dir", type=Path, default=Path(tempfile.gettempdir()) / "heteroflow-fleet",
                            help="where each simulated agent records its processes (one directory per node), so "
                                 "that a restarted fleet adopts the tasks it left running")
        parser.add_argument("--card-fault", type=_card_fault, action="append", default=[], metavar="NODE:INDEX",
                            help="this node's card (its first card of that index) reports failed from the start "
                                 "(design §17.3); repeatable. `manage.py card_fault` injects one while running")
        parser.add_argument("--card-fault-rate", type=_rate, default=0.0, metavar="P",
                            help="each heartbeat fails each healthy card with this probability (soak)")

    def handle(self, *args, server: str, interval: float, speedup: float, state_dir: Path, shard: tuple[int, int],
               card_fault: list[tuple[str, int]], card_fault_rate: float, **options):
        if speedup <= 0:
            raise CommandError("--speedup must be positive")
        index, count = shard
        members = [SimulatedNode.of(node) for node in Node.objects.prefetch_related("gpus").order_by("name")]
        members = members[index::count]
        if not members:
            raise CommandError("no nodes in the database: run `manage.py seed_demo` first")
        by_name = {member.name: member for member in members}
        for name, index in card_fault:
            card = next((card for card in by_name[name].cards if card.index == index), None) \
                if name in by_name else None
            if card is None:
                raise CommandError(f"--card-fault {name}:{index}: no such card among this fleet's nodes")
            card_fault_inject(state_dir / name, card_type=card.type, index=index)
        # The demo's nodes exist already, and only an admin token may register an existing name.
        credential = self._admin_token()
        self._wait_for(server)
        stop = threading.Event()
        threads = []
        for member in members:
            token = self._register(server, credential, member)
            agent = simulated_agent(server, token, member, speedup, state_dir / member.name, card_fault_rate)
            thread = threading.Thread(target=self._run, args=(agent, interval, stop), name=f"sim-{member.name}",
                                      daemon=True)
            thread.start()
            threads.append(thread)
        self.stdout.write(self.style.SUCCESS(f"{len(threads)} simulated agents running against {server}; "
                                             "Ctrl-C stops them"))
        try:
            while any(thread.is_alive() for thread in threads):
                time.sleep(1)
        except KeyboardInterrupt:
            stop.set()
        for thread in threads:
            thread.join(timeout=interval + 15)

    def _admin_token(self) -> str:
        user, created = get_user_model().objects.get_or_create(username=FLEET_USERNAME,
                                                               defaults={"is_staff": True})
        if created:
            user.set_unusable_password()
            user.save(update_fields=["password"])
        # Knox keeps digests only, so each run issues a token of its own, valid for a day.
        return AuthToken.objects.create(user=user, expiry=timedelta(days=1))[1]

    def _wait_for(self, server: str) -> None:
        deadline = time.monotonic() + SERVER_WAIT_SECONDS
        while True:
            try:
                requests.get(server.rstrip("/") + "/api/schema/", timeout=5)
                return
            except requests.RequestException as exc:
                if time.monotonic() > deadline:
                    raise CommandError(f"{server} does not answer: {exc}")
                time.sleep(1)

    def _register(self, server: str, credential: str, member: SimulatedNode) -> str:
        response = requests.post(
            server.rstrip("/") + REGISTER_PATH,
            json={"name": member.name, "internal_ip": member.internal_ip, "public_ip": member.public_ip,
                  "cpu_cores": member.cpu_cores, "memory_gb": member.memory_gb},
            headers={"Authorization": f"Token {credential}"},
            timeout=10,
        )
        if response.status_code != 200:
            raise CommandError(f"registering {member.name} failed: {response.status_code} {response.text[:300]}")
        return response.json()["token"]

    @staticmethod
    def _run(agent: Agent, interval: float, stop: threading.Event) -> None:
        try:
            agent.run_forever(interval, stop)
        finally:
            agent.close()
