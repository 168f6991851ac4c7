"""Fractional-GPU shards (design §7): the slice of one card a fractional task gets at bind, and its limits.

A shard lives in `task.shard` while the task is active. Occupancy is always derived from the active tasks, so a
task that finishes stops counting at once (its shard stays on the row as history) and `task_transition` clears the
shard when a task goes back to pending. The rules are explained in docs/fractional-gpus.md.
"""

import re
from collections.abc import Iterable
from enum import StrEnum
from typing import Any

from scheduling.framework.occupancy import cards_held
from scheduling.framework.sharing import compute_percent_for, may_share
from scheduling.framework.snapshot import SchedulerConfig, TenancyView
from scheduling.cache.snapshot_builder import build_tenancy

NAME = "shard"

ENV_MEMORY_LIMIT = "HETEROFLOW_GPU_MEMORY_LIMIT_MB"
ENV_COMPUTE_PERCENT = "HETEROFLOW_GPU_COMPUTE_PERCENT"
ENV_QOS = "HETEROFLOW_GPU_QOS"
ENV_MPS_MEMORY_LIMIT = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
ENV_MPS_THREAD_PERCENT = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"


class QoS(StrEnum):
    # The hardware enforces both limits: MPS with per-client memory and thread limits (NVIDIA Volta and newer).
    GUARANTEED = "guaranteed"
    # Limits are set but the hardware enforces them only in part (older NVIDIA: MPS without per-client limits).
    BURSTABLE = "burstable"
    # Limits are advisory: the container is told them, nothing below it enforces them (non-NVIDIA vendors).
    BEST_EFFORT = "best-effort"


# NVIDIA models of compute capability 7.0 or newer, where MPS enforces per-client memory and thread limits.
# Every RTX-branded card is Turing or newer; GTX 16xx is Turing too. Unknown or empty models are not assumed capable.
_MPS_CAPABLE_MODEL = re.compile(
    r"""
    \bRTX\b | \bGTX\s*16\d\d | \bTITAN\s*V\b
    | \bQUADRO\s*GV100\b | \bV100 | \bT4\b | \bT4G\b
    | \bA(2|10G?|16|30|40|100|800)\b
    | \bH(20|100|200|800)\b | \bGH200\b
    | \bL(4|20|40S?)\b
    | \bB(100|200)\b | \bGB(200|300)\b
    """,
    re.IGNORECASE | re.VERBOSE,
)


class ShardAllocationError(Exception):
    """The card cannot hold the shard now; bind rolls back with reasons.SHARD_ALLOCATION_FAILED."""


def qos_for(*, vendor: str, model: str) -> QoS:
    if vendor != "nvidia":
        return QoS.BEST_EFFORT
    return QoS.GUARANTEED if _MPS_CAPABLE_MODEL.search(model or "") else QoS.BURSTABLE


def shard_env(*, vendor: str, card_index: int, memory_limit_mb: int, compute_percent: int, qos: QoS) -> dict[str, str]:
    env = {
        ENV_MEMORY_LIMIT: str(memory_limit_mb),
        ENV_COMPUTE_PERCENT: str(compute_percent),
        ENV_QOS: str(qos),
    }
    if vendor == "nvidia":
        env[ENV_MPS_MEMORY_LIMIT] = f"{card_index}={memory_limit_mb}M"
        env[ENV_MPS_THREAD_PERCENT] = str(compute_percent)
    return env


def occupancy_of(placements: Iterable[tuple[int, list[int] | None, dict[str, Any] | None]]
                 ) -> dict[int, dict[str, Any]]:
    """What a node's active tasks hold, per card index, from their (tenant_id, gpus, shard): `memory_mb` and
    `compute_percent` summed over shards, `shards` (how many), `whole_card` (a whole-card task holds it) and
    `tenants` (ids of every occupant's tenant)."""
    occupancy: dict[int, dict[str, Any]] = {}

    def entry(card_index: int) -> dict[str, Any]:
        return occupancy.setdefault(
            card_index, {"memory_mb": 0, "compute_percent": 0, "shards": 0, "whole_card": False, "tenants": set()}
        )

    for tenant_id, gpus, shard in placements:
        for card_index in cards_held(gpus, shard):
            card = entry(card_index)
            card["tenants"].add(tenant_id)
            if shard:
                card["memory_mb"] += shard["memory_limit_mb"]
                card["compute_percent"] += shard["compute_percent"]
                card["shards"] += 1
            else:
                card["whole_card"] = True
    return occupancy


def shard_on_card(*, task, card_index: int, vendor: str, model: str, memory_total_mb: int, memory_used_mb: int,
                  held: dict[str, Any] | None, tenancy: TenancyView | None = None,
                  config: SchedulerConfig | None = None) -> dict[str, Any]:
    """The shard of fractional `task` on card `card_index`, over live figures its caller read under the node row
    lock (so concurrent binds on one node see each other's shards: memory and compute are never overcommitted and
    tenants that may not share never meet on a card, design §8, fail closed): the card's vendor, model and memory,
    what the node's active tasks hold on it (`occupancy_of`), and the share groups (`tenancy`; None reads them
    now). Raises ShardAllocationError when the card cannot hold it."""
    if held is not None:
        _check_may_join(task.tenant_id, held, tenancy)
    in_use = max(memory_used_mb, held["memory_mb"] if held else 0)
    config = config or SchedulerConfig.from_settings()
    free_mb = int(memory_total_mb - config.reserve_mb(memory_total_mb) - in_use)
    if task.gpu_memory_mb > free_mb:
        raise ShardAllocationError(
            f"card {card_index} has {max(free_mb, 0)} MB free after reserve, the task needs {task.gpu_memory_mb} MB"
        )
    compute_percent = compute_percent_for(
        gpu_memory_mb=task.gpu_memory_mb,
        gpu_compute_percent=task.gpu_compute_percent,
        card_memory_mb=memory_total_mb,
    )
    compute_held = held["compute_percent"] if held else 0
    if compute_held + compute_percent > 100:
        raise ShardAllocationError(
            f"card {card_index} has {100 - compute_held} % compute left, the task needs {compute_percent} %"
        )
    qos = qos_for(vendor=vendor, model=model)
    return {
        "card": card_index,
        "memory_limit_mb": task.gpu_memory_mb,
        "compute_percent": compute_percent,
        "qos": str(qos),
        "env": shard_env(
            vendor=vendor,
            card_index=card_index,
            memory_limit_mb=task.gpu_memory_mb,
            compute_percent=compute_percent,
            qos=qos,
        ),
    }


def _check_may_join(tenant_id: int, held: dict[str, Any], tenancy: TenancyView | None) -> None:
    if held["whole_card"]:
        raise ShardAllocationError("a whole-card task holds the card")
    if tenancy is None:
        try:
            # Share groups as they are now (dedicated nodes are the filters' business, not the card's).
            tenancy = build_tenancy(())
        except Exception as error:
            raise ShardAllocationError("share groups could not be read; refusing to share the card") from error
    refused = sorted(other for other in held["tenants"] if not may_share(tenant_id, other, tenancy))
    if refused:
        raise ShardAllocationError(f"tenant {tenant_id} may not share the card with tenants {refused}")
