import pytest
from rest_framework.test import APIClient

from nodes.agent.topology import TOPOLOGY_LABEL
from nodes.services import agent_register

NV4_LABEL = "nv=0-1,2-3;numa=0:0,1:0,2:1,3:1"


def card(index: int, **fields) -> dict:
    body = {"index": index, "uuid": f"GPU-{index}", "type": "nvidia", "model": "A100", "memory_total_mb": 81920,
            "memory_used_mb": 0, "utilization": 0, "temperature": 40, "numa": index // 2}
    return {**body, **fields}


def heartbeat_body(cards: int = 4, **fields) -> dict:
    body = {"cpu_percent": 12.5, "memory_used_mb": 20480, "gpus": [card(i) for i in range(cards)],
            "labels": {TOPOLOGY_LABEL: NV4_LABEL}}
    return {**body, **fields}


def node_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


@pytest.fixture
def registered(db):
    """A freshly registered node and its agent token."""
    return agent_register(name="gpu-a", internal_ip="10.0.3.7/24", public_ip="203.0.113.7", cpu_cores=64,
                          memory_gb=512)


@pytest.fixture
def agent(registered):
    return node_client(registered[1])
