"""What a rolling update takes (design §17.2), in a throwaway database: a service of N replicas on simulated nodes
of the demo fleet's A100 model, served by a real HTTP server, each node's real agent probing its replicas, and the
scheduler's loops at their production periods (a cycle as soon as work waits, rollouts every 5 s, the rebuild every
10 s). It waits for every replica to be ready, changes the image, and samples the group through the API until the
rollout is complete.

Prints the rollout's duration, the fewest ready replicas and the most live ones any sample saw, when each
new-revision replica became ready, and the timeline of the ready count a user polling the API (or the group page)
sees. Bounded by --seconds.
"""

import secrets
import threading
import time
from contextlib import ExitStack

import requests
from django.core.management.base import BaseCommand, CommandError
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler
from django.core.wsgi import get_wsgi_application
from django.db import connections
from django.utils.dateparse import parse_datetime

from nodes.agent.agent import Agent
from nodes.agent.client import AgentClient
from nodes.agent.detectors import fake_cards_for
from nodes.agent.runtime import SimulatedRuntime
from nodes.demo_cluster import DEMO_FLEET
from nodes.services import agent_register, node_update
from scheduling import lifecycle
from scheduling.bench.database import throwaway_database
from scheduling.cycle.run import run_cycle
from scheduling.groups.replicas import rebuild_inference_groups
from scheduling.groups.rollout import drive_rollouts
from scheduling.models import Task
from tenants.models import Tenant
from tenants.services import tenant_user_create

# The production periods (heteroflow_site.periodic_jobs) of the loops a rollout depends on.
LOOP_PERIODS = {"cycle": 1.0, "rollouts": 5.0, "inference-rebuild": 10.0}
LOOPS = {"cycle": run_cycle, "rollouts": drive_rollouts, "inference-rebuild": rebuild_inference_groups}


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


class Command(BaseCommand):
    help = "Measure a rolling update of an inference group on simulated demo nodes through the real agent."

    def add_arguments(self, parser):
        parser.add_argument("--replicas", type=int, default=4)
        parser.add_argument("--nodes", type=int, default=2)
        parser.add_argument("--interval", type=float, default=3.0,
                            help="seconds between an agent's steps (simulate_fleet's default)")
        parser.add_argument("--probe-period", type=int, default=10, help="readiness period_seconds (the default)")
        parser.add_argument("--start-up", type=float, default=2.0,
                            help="seconds a simulated replica takes before it answers its probe")
        parser.add_argument("--seconds", type=float, default=150.0, help="give up after this long")

    def handle(self, *args, replicas, nodes, interval, probe_period, start_up, seconds, **options):
        with throwaway_database(), ExitStack() as stack:
            stop = threading.Event()
            server = ThreadedWSGIServer(("127.0.0.1", 0), _QuietHandler)
            server.set_app(get_wsgi_application())
            threading.Thread(target=server.serve_forever, daemon=True).start()
            stack.callback(server.shutdown)
            url = f"http://127.0.0.1:{server.server_address[1]}"
            agents = self._fleet(url, nodes, interval, stop)
            stack.callback(self._stop_fleet, agents, stop)
            self._start_loops(stop)
            session = self._tenant_session()
            figures = self._rollout(url, session, replicas, probe_period, start_up, seconds)
        self._print(figures, replicas)

    def _fleet(self, url: str, count: int, interval: float, stop: threading.Event) -> list[Agent]:
        model = DEMO_FLEET[0][1]
        agents = []
        for index in range(count):
            node, token = agent_register(name=f"demo-a100-{index}", internal_ip=f"10.20.0.{10 + index}/16",
                                         public_ip=None, cpu_cores=model.cpu_cores, memory_gb=model.memory_gb)
            node_update(node=node, schedulable=True)
            cards = fake_cards_for(model.gpu_type, model.model, model.cards, model.memory_mb)
            agent = Agent(AgentClient(url, token), SimulatedRuntime(), card_source=lambda cards=cards: list(cards),
                          topology_source=lambda: None, cpu_percent=lambda: 5.0, memory_used=lambda: 4096)
            threading.Thread(target=self._agent_loop, args=(agent, interval, stop), daemon=True).start()
            agents.append(agent)
        return agents

    @staticmethod
    def _agent_loop(agent: Agent, interval: float, stop: threading.Event) -> None:
        agent.run_forever(interval, stop)

    @staticmethod
    def _stop_fleet(agents: list[Agent], stop: threading.Event) -> None:
        stop.set()
        for agent in agents:
            for task_id in agent.running_task_ids():
                agent._kill(task_id)

    def _start_loops(self, stop: threading.Event) -> None:
        def loop(name: str) -> None:
            try:
                while not stop.wait(LOOP_PERIODS[name]):
                    LOOPS[name]()
            finally:
                connections.close_all()

        for name in LOOPS:
            threading.Thread(target=loop, args=(name,), daemon=True).start()

    @staticmethod
    def _tenant_session() -> requests.Session:
        tenant = Tenant.objects.create(name="bench-rollout")
        _, token = tenant_user_create(tenant=tenant, username="bench-rollout", password=secrets.token_urlsafe(24))
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token}"
        return session

    def _rollout(self, url, session, replicas, probe_period, start_up, seconds) -> dict:
        env = {"HETEROFLOW_SIM_SECONDS": "86400", "HETEROFLOW_SIM_READY_SECONDS": str(start_up)}
        created = session.post(f"{url}/api/v1/task-groups", json={
            "name": "chat", "type": "inference", "world_size": 1, "gpus_per_worker": 1, "gpu_type": "nvidia",
            "replicas": replicas, "image": "vllm/vllm-openai:v0.6.0", "env": env,
            "readiness": {"path": "/health", "period_seconds": probe_period}}, timeout=30)
        if created.status_code != 201:
            raise CommandError(f"the group was refused: {created.text}")
        group = f"{url}/api/v1/task-groups/{created.json()['id']}"
        deadline = time.monotonic() + seconds
        first_ready = self._wait(lambda: session.get(group, timeout=30).json()["ready_replicas"] >= replicas,
                                 deadline, "the replicas never all became ready")
        changed = session.patch(group, json={"image": "vllm/vllm-openai:v0.6.1"}, timeout=30)
        if changed.status_code != 200:
            raise CommandError(f"the update was refused: {changed.text}")
        started = time.monotonic()
        timeline: list[tuple[float, int, int]] = []
        while True:
            body = session.get(group, timeout=30).json()
            live = sum(member["status"] not in lifecycle.TERMINAL_STATES for member in body["members"])
            sample = (round(time.monotonic() - started, 1), body["ready_replicas"], live)
            if not timeline or sample[1:] != timeline[-1][1:]:
                timeline.append(sample)
            revisions = session.get(f"{group}/revisions", timeout=30).json()
            if revisions[0]["state"] != "rolling_out":
                break
            if time.monotonic() > deadline:
                raise CommandError(f"the rollout did not finish in {seconds} s; last sample {sample}")
            time.sleep(0.5)
        took = time.monotonic() - started
        update_at = parse_datetime(revisions[0]["created_at"])
        new = Task.objects.filter(group_id=created.json()["id"], revision=2).order_by("ready_at")
        return {"creation_to_ready": first_ready, "took": took, "state": revisions[0]["state"],
                "timeline": timeline,
                "ready_at": [round((task.ready_at - update_at).total_seconds(), 1) for task in new if task.ready_at]}

    @staticmethod
    def _wait(condition, deadline: float, failure: str) -> float:
        started = time.monotonic()
        while not condition():
            if time.monotonic() > deadline:
                raise CommandError(failure)
            time.sleep(0.5)
        return time.monotonic() - started

    def _print(self, figures: dict, replicas: int) -> None:
        timeline = figures["timeline"]
        self.stdout.write(f"replicas={replicas} all_ready_after_creation_s={figures['creation_to_ready']:.1f}")
        self.stdout.write(f"rollout_s={figures['took']:.1f} outcome={figures['state']} "
                          f"min_ready={min(ready for _, ready, _ in timeline)} "
                          f"max_live={max(live for _, _, live in timeline)}")
        self.stdout.write("new replicas ready at (s after the update): "
                          + ", ".join(f"{seconds:.1f}" for seconds in figures["ready_at"]))
        self.stdout.write("what a user polling the group sees (s after the update: ready/live, live counting "
                          "replicas still stopping): "
                          + ", ".join(f"{at:.1f}: {ready}/{live}" for at, ready, live in timeline))

