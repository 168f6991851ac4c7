import threading

from django.core.management.base import BaseCommand, CommandError

from nodes.agent.agent import Agent
from nodes.agent.client import AgentClient
from nodes.agent.detectors import fake_cards_for
from nodes.agent.runtime import DockerRuntime, SimulatedRuntime

RUNTIMES = {"docker": DockerRuntime, "simulated": SimulatedRuntime}


def parse_fake_cards(text: str):
    """`nvidia:A100:8:81920` → eight idle A100 cards of 80 GB, for a simulated node."""
    try:
        gpu_type, model, count, memory_mb = text.split(":")
        return fake_cards_for(gpu_type, model, int(count), int(memory_mb))
    except ValueError as exc:
        raise CommandError(f"--fake-cards wants TYPE:MODEL:COUNT:MEMORY_MB, got {text!r} ({exc})")


class Command(BaseCommand):
    help = "Run the node agent in the foreground against a HeteroFlow server (register first for the token)."

    def add_arguments(self, parser):
        parser.add_argument("--server", required=True, help="base URL of the control plane, e.g. http://10.0.0.1:8000")
        parser.add_argument("--token", required=True, help="this node's agent token from /api/v1/agent/register")
        parser.add_argument("--runtime", choices=sorted(RUNTIMES), default="docker")
        parser.add_argument("--interval", type=float, default=5.0, help="seconds between heartbeats")
        parser.add_argument("--state-dir", help="simulated runtime: where it records its processes, so that a "
                                                "restarted agent adopts them")
        parser.add_argument("--fake-cards", help="report fabricated cards instead of detecting them, "
                                                 "TYPE:MODEL:COUNT:MEMORY_MB")

    def handle(self, *args, server: str, token: str, runtime: str, interval: float, fake_cards: str | None,
               state_dir: str | None, **options):
        extra = {}
        if fake_cards:
            cards = parse_fake_cards(fake_cards)
            extra = {"card_source": lambda: list(cards), "topology_source": lambda: None}
        chosen = SimulatedRuntime(state_dir) if runtime == "simulated" else DockerRuntime()
        agent = Agent(AgentClient(server, token), chosen, **extra)
        stop = threading.Event()
        self.stdout.write(f"agent running against {server} with the {runtime} runtime; Ctrl-C stops it")
        try:
            agent.run_forever(interval, stop)
        except KeyboardInterrupt:
            stop.set()
        finally:
            agent.close()
