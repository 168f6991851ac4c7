"""The tenants of a soak run: one client thread per tenant over the HTTP API (and its pages), together submitting
`rate` jobs per second — whole-card and fractional tasks, gangs, inference groups with a window — stopping some,
listing and reading. Every submission carries a unique name, so the checker can tell a lost or doubled one."""

from __future__ import annotations

import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import requests

from scheduling.soak.cluster import TenantLogin

IMAGE = "registry.example.com/soak/job:1"
SIM_SECONDS = "HETEROFLOW_SIM_SECONDS"
SIM_EXIT_CODE = "HETEROFLOW_SIM_EXIT_CODE"
TIMEOUT_SECONDS = 10


@dataclass
class Ledger:
    """What the tenants did and saw, shared by their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    # Task name → id from the 201 (None: the answer was lost, a timeout or a server error).
    tasks: dict[str, int | None] = field(default_factory=dict)
    groups: dict[str, int | None] = field(default_factory=dict)
    stopped: set[int] = field(default_factory=set)
    statuses: Counter = field(default_factory=Counter)
    server_errors: list[str] = field(default_factory=list)

    def record(self, kind: str, name: str, response: requests.Response | None) -> int | None:
        created = response is not None and response.status_code == 201
        with self.lock:
            self.statuses[response.status_code if response is not None else "no answer"] += 1
            if response is not None and response.status_code >= 500:
                self.server_errors.append(f"{response.request.method} {response.request.path_url} "
                                          f"{response.status_code}")
            (self.tasks if kind == "task" else self.groups)[name] = response.json()["id"] if created else None
        return response.json()["id"] if created else None


class TenantClient(threading.Thread):
    def __init__(self, login: TenantLogin, *, servers: list[str], rate: float, gpu_types: list[str],
                 ledger: Ledger, stop: threading.Event, seed: int) -> None:
        super().__init__(name=f"tenant-{login.name}", daemon=True)
        self.login, self.servers, self.rate, self.gpu_types = login, servers, rate, gpu_types
        self.ledger, self.stop_event, self.rng = ledger, stop, random.Random(seed)
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {login.token}"
        self.pages = requests.Session()
        self.serial = 0
        self.mine: list[int] = []

    def run(self) -> None:
        while not self.stop_event.is_set():
            started = time.monotonic()
            try:
                self.act()
            except requests.RequestException:
                pass  # a web process being killed: the next action goes to the next server
            self.stop_event.wait(max(0.0, self.rng.expovariate(self.rate) - (time.monotonic() - started)))

    def act(self) -> None:
        roll = self.rng.random()
        if roll < 0.45:
            self.submit_task(fractional=False)
        elif roll < 0.65:
            self.submit_task(fractional=True)
        elif roll < 0.72:
            self.submit_group("training")
        elif roll < 0.75:
            self.submit_group("inference")
        elif roll < 0.83 and self.mine:
            self.stop_one()
        elif roll < 0.93:
            self.get("/api/v1/tasks")
        else:
            self.read_page()

    def submit_task(self, *, fractional: bool) -> None:
        name = self.next_name("task")
        labels = {SIM_SECONDS: str(self.rng.choice((5, 10, 20, 40, 80)))}
        if self.rng.random() < 0.1:
            labels[SIM_EXIT_CODE] = "1"
        body = {"name": name, "image": IMAGE, "command": "python train.py", "labels": labels,
                "gpu_type": self.rng.choice(self.gpu_types), "cpu_cores": 2, "memory_mb": 4096,
                "priority": self.rng.choice((10, 30, 50, 50, 50, 70, 90)), "preemptible": self.rng.random() < 0.4}
        if fractional:
            body["gpu_memory_mb"] = self.rng.choice((2048, 4096, 8192))
        else:
            body["gpu_required"] = self.rng.choice((1, 1, 1, 2, 2, 4, 8))
        task_id = self.ledger.record("task", name, self.post("/api/v1/tasks", body))
        if task_id:
            self.mine.append(task_id)

    def submit_group(self, kind: str) -> None:
        name = self.next_name(kind)
        body = {"name": name, "type": kind, "image": IMAGE, "command": "torchrun train.py",
                "gpu_type": self.rng.choice(self.gpu_types), "priority": 50}
        if kind == "training":
            body.update(world_size=self.rng.choice((2, 3)), gpus_per_worker=self.rng.choice((1, 2)))
        else:
            # Scaled to zero for a window every hour: the window loop runs on a live group.
            minute = time.gmtime().tm_min
            body.update(world_size=1, gpus_per_worker=1, replicas=2,
                        window={"start": f"00:{minute:02d}", "end": f"23:{minute:02d}", "action": "scale",
                                "scale_to": 1})
        self.ledger.record("group", name, self.post("/api/v1/task-groups", body))

    def stop_one(self) -> None:
        task_id = self.mine.pop(self.rng.randrange(len(self.mine)))
        response = self.post(f"/api/v1/tasks/{task_id}/stop", {})
        if response is not None and response.status_code < 300:
            with self.ledger.lock:
                self.ledger.stopped.add(task_id)

    def read_page(self) -> None:
        server = self.rng.choice(self.servers)
        if "sessionid" not in self.pages.cookies:
            form = self.pages.get(f"{server}/login/", timeout=TIMEOUT_SECONDS)
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
            if token is None:
                return
            self.pages.post(f"{server}/login/", timeout=TIMEOUT_SECONDS, headers={"Referer": f"{server}/login/"},
                            data={"username": self.login.name, "password": self.login.password,
                                  "csrfmiddlewaretoken": token.group(1)})
        self.note(self.pages.get(f"{server}/tasks/", timeout=TIMEOUT_SECONDS))

    def post(self, path: str, body: dict) -> requests.Response | None:
        try:
            return self.session.post(self.rng.choice(self.servers) + path, json=body, timeout=TIMEOUT_SECONDS)
        except requests.RequestException:
            return None

    def get(self, path: str) -> None:
        self.note(self.session.get(self.rng.choice(self.servers) + path, timeout=TIMEOUT_SECONDS))

    def note(self, response: requests.Response) -> None:
        with self.ledger.lock:
            self.ledger.statuses[response.status_code] += 1
            if response.status_code >= 500:
                self.ledger.server_errors.append(f"GET {response.request.path_url} {response.status_code}")

    def next_name(self, kind: str) -> str:
        self.serial += 1
        return f"{self.login.name}-{kind}-{self.serial}"
