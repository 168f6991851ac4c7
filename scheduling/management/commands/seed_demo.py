from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from nodes.demo_cluster import card_numa, demo_nodes
from nodes.management.commands.simulate_fleet import FLEET_USERNAME
from nodes.models import GPU, Node
from scheduling.models import Task
from scheduling.services.task_create import task_create
from tenants.models import ShareGroup, Tenant, TenantMembership

ADMIN_USERNAME = "admin"
ADMIN_PASSWORD = "heteroflow-admin"
TENANT_USERS = {"acme": ("alice", "alice-password"), "globex": ("bob", "bob-password"),
                "initech": ("carol", "carol-password")}
DEMO_USERNAMES = {ADMIN_USERNAME, FLEET_USERNAME, *(username for username, _ in TENANT_USERS.values())}
TENANT_QUOTAS = {"acme": 64, "globex": 32, "initech": None}

DEMO_TASKS = [
    ("acme", dict(name="llama-finetune", type="training", gpu_type="nvidia", gpu_required=8, cpu_cores=32,
                  memory_mb=262144, priority=70, labels={"nvlink": "required"})),
    ("acme", dict(name="resnet-batch", type="batch", gpu_type="nvidia", gpu_required=2, priority=40,
                  preemptible=True)),
    ("acme", dict(name="notebook-shard", type="batch", gpu_memory_mb=8192, priority=50)),
    ("globex", dict(name="ascend-pretrain", type="training", gpu_type="ascend", gpu_required=8, priority=60)),
    ("globex", dict(name="qwen-serving", type="inference", gpu_type="ascend", gpu_required=1, priority=80)),
    ("globex", dict(name="etl-embeddings", type="batch", gpu_type="hygon", gpu_required=4, priority=30,
                    preemptible=True)),
    ("initech", dict(name="mlu-inference", type="inference", gpu_type="cambricon", gpu_required=1, priority=60)),
    ("initech", dict(name="kunlun-sweep", type="batch", gpu_type="kunlun", gpu_required=2, priority=20,
                     preemptible=True, labels={"region": "cn-north", "zone": "cn-north-b"})),
]


class Command(BaseCommand):
    help = "Create (idempotently) a demo cluster: tenants, a share group, users, ~40 nodes of ten GPU types, tasks."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true",
                            help="seed even with DEBUG off or users the demo did not create in the database")

    def handle(self, *args, **options):
        if not settings.DEBUG and not options["force"]:
            # DEBUG off is how production runs: published logins and fake online nodes that would absorb real jobs
            # must be asked for (design §16.5).
            raise CommandError("DEBUG is off, so this looks like a production deployment: the demo creates logins "
                               "with published passwords and fake online nodes. Use --force to seed it anyway.")
        others = get_user_model().objects.exclude(username__in=DEMO_USERNAMES)
        if others.exists() and not options["force"]:
            # Demo logins with published passwords must not appear beside real users by accident.
            raise CommandError(f"this database has {others.count()} user(s) that are not demo users (e.g. "
                               f"{others.first().username!r}); it is not a demo database. Use --force to seed "
                               "it anyway.")
        with transaction.atomic():
            tenants = self._tenants()
            self._users(tenants)
            created_nodes = self._nodes()
            created_tasks = self._tasks(tenants)
        self.stdout.write(self.style.SUCCESS(
            f"Demo cluster ready: {Node.objects.count()} nodes ({created_nodes} new), "
            f"{Tenant.objects.count()} tenants, {created_tasks} new tasks."
        ))
        self.stdout.write(f"  Admin login:  {ADMIN_USERNAME} / {ADMIN_PASSWORD}")
        for tenant, (username, password) in TENANT_USERS.items():
            self.stdout.write(f"  Tenant {tenant}: {username} / {password}")

    def _tenants(self) -> dict[str, Tenant]:
        tenants = {}
        for name, quota in TENANT_QUOTAS.items():
            tenants[name], _ = Tenant.objects.get_or_create(name=name, defaults={"gpu_quota": quota})
        group, _ = ShareGroup.objects.get_or_create(name="research-share")
        group.tenants.add(tenants["acme"], tenants["initech"])
        return tenants

    def _users(self, tenants: dict[str, Tenant]) -> None:
        User = get_user_model()
        admin, created = User.objects.get_or_create(username=ADMIN_USERNAME,
                                                    defaults={"is_staff": True, "is_superuser": True})
        if created:
            admin.set_password(ADMIN_PASSWORD)
            admin.save()
        for tenant_name, (username, password) in TENANT_USERS.items():
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(password)
                user.save()
            TenantMembership.objects.get_or_create(user=user, defaults={"tenant": tenants[tenant_name]})

    def _nodes(self) -> int:
        created = 0
        now = timezone.now()
        for spec in demo_nodes():
            node_model = spec["node_model"]
            node, was_created = Node.objects.get_or_create(
                name=spec["name"],
                defaults={
                    "status": Node.Status.ONLINE,
                    "gpu_type": node_model.gpu_type,
                    "gpu_total": node_model.cards,
                    "cpu_cores": node_model.cpu_cores,
                    "memory_gb": node_model.memory_gb,
                    "cpu_percent": 12.0,
                    "memory_used_mb": node_model.memory_gb * 1024 // 10,
                    "region": spec["region"],
                    "zone": spec["zone"],
                    "rack": spec["rack"],
                    "labels": spec["labels"],
                    "internal_ip": spec["internal_ip"],
                    "public_ip": spec["public_ip"],
                    "last_heartbeat_at": now,
                },
            )
            if was_created:
                created += 1
                GPU.objects.bulk_create(
                    GPU(node=node, index=index, uuid=f"{node.name}-{index}", type=node_model.gpu_type,
                        model=node_model.model, memory_total_mb=node_model.memory_mb, memory_used_mb=300,
                        utilization=0, temperature=38, numa=card_numa(node_model, index))
                    for index in range(node_model.cards)
                )
        return created

    def _tasks(self, tenants: dict[str, Tenant]) -> int:
        created = 0
        for tenant_name, fields in DEMO_TASKS:
            tenant = tenants[tenant_name]
            if Task.objects.filter(tenant=tenant, name=fields["name"]).exists():
                continue
            task_create(tenant=tenant, image="registry.local/demo:latest", command="python train.py", **fields)
            created += 1
        return created
