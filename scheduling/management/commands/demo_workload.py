import random
import time

from django.core.management.base import BaseCommand

from nodes.agent.runtime import SIM_EXIT_CODE_KEY, SIM_SECONDS_KEY
from nodes.models import GPU_TYPES
from scheduling import lifecycle
from scheduling.models import Task
from scheduling.services.task_create import task_create
from tenants.models import Tenant

KINDS = ("batch", "batch", "training", "inference")


class Command(BaseCommand):
    help = "Keep the demo cluster busy: submit a random task every few seconds while few are pending."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=4.0, help="seconds between submissions")
        parser.add_argument("--max-pending", type=int, default=25, help="pause submitting above this many pending")
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--count", type=int, default=0, help="stop after this many tasks (0: run until stopped)")

    def handle(self, *args, interval, max_pending, seed, count, **options):
        rng = random.Random(seed)
        tenants = list(Tenant.objects.filter(status=Tenant.Status.ACTIVE))
        if not tenants:
            self.stderr.write("no active tenant: run `manage.py seed_demo` first")
            return
        submitted = 0
        while not count or submitted < count:
            if Task.objects.filter(status=lifecycle.PENDING).count() < max_pending:
                task = task_create(tenant=rng.choice(tenants), **random_task(rng))
                submitted += 1
                self.stdout.write(f"submitted {task.name} ({task.type}, {task.gpu_type or 'any'}, "
                                  f"{task.gpu_required or str(task.gpu_memory_mb) + ' MB'})")
            time.sleep(interval)


def random_task(rng: random.Random) -> dict:
    kind = rng.choice(KINDS)
    seconds = rng.randint(20, 120)
    fields = {
        "name": f"demo-{kind}-{rng.randint(1000, 9999)}",
        "type": kind,
        "image": "registry.local/demo:latest",
        "command": "python run.py",
        "priority": rng.choice([20, 40, 50, 60, 80]),
        "labels": {SIM_SECONDS_KEY: str(seconds), SIM_EXIT_CODE_KEY: "1" if rng.random() < 0.08 else "0"},
        "cpu_cores": rng.choice([4, 8, 16]),
        "memory_mb": rng.choice([16384, 32768, 65536]),
    }
    if kind == "batch" and rng.random() < 0.3:
        fields["gpu_memory_mb"] = rng.choice([4096, 8192, 16384])
    else:
        fields["gpu_type"] = rng.choice(GPU_TYPES)
        fields["gpu_required"] = rng.choice([1, 1, 2, 4, 8] if kind == "training" else [1, 1, 2])
    fields["preemptible"] = kind == "batch" and rng.random() < 0.5
    return fields
