"""Card faults for the simulated fleet (design §17.3): a simulated card is healthy until a fault is injected — by
`manage.py card_fault` (another process), by `simulate_fleet --card-fault`, or at random at `--card-fault-rate` —
and then reports `failed` with an Xid 79 ("fallen off the bus") until the fault is cleared.

Faults live in a small JSON file in the agent's state directory, so the command that injects one and the fleet that
reports it need share nothing but that directory, and a restarted fleet still reports its failed cards.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from nodes.agent.detectors import Card
from nodes.agent.health import FAILED, CardHealth, HealthError, HealthReport

FAULT_FILE = "card-faults.json"
SIMULATED_FAULT = ("xid-79", "Xid 79: GPU has fallen off the bus (simulated)")


def _key(card_type: str, index: int) -> str:
    return f"{card_type}:{index}"


def faults_in(state_dir: Path) -> dict[str, dict]:
    try:
        return json.loads((state_dir / FAULT_FILE).read_text())
    except (OSError, ValueError):
        return {}


def _write(state_dir: Path, faults: dict[str, dict]) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=state_dir, prefix=".card-faults")
    with os.fdopen(handle, "w") as out:
        json.dump(faults, out)
    os.replace(temporary, state_dir / FAULT_FILE)


def card_fault_inject(state_dir: Path, *, card_type: str, index: int) -> dict:
    """Make the card fail from the agent's next heartbeat on; the fault as recorded."""
    faults = faults_in(state_dir)
    code, message = SIMULATED_FAULT
    fault = faults.setdefault(_key(card_type, index), {"code": code, "message": message,
                                                       "at": datetime.now(UTC).isoformat()})
    _write(state_dir, faults)
    return fault


def card_fault_clear(state_dir: Path, *, card_type: str, index: int) -> bool:
    """The card reports healthy again (an admin still releases it); False if it had no fault."""
    faults = faults_in(state_dir)
    cleared = faults.pop(_key(card_type, index), None) is not None
    _write(state_dir, faults)
    return cleared


class SimulatedCardHealth:
    """A simulated agent's `health_source`: each card's health from the fault file; with `fault_rate`, each
    heartbeat fails each healthy card with that probability (for the soak)."""

    def __init__(self, state_dir: Path, *, fault_rate: float = 0.0, rng: random.Random | None = None) -> None:
        self.state_dir = state_dir
        self.fault_rate = fault_rate
        self.rng = rng or random.Random()

    def __call__(self, cards: Sequence[Card]) -> dict[str, HealthReport]:
        if self.fault_rate:
            for card in cards:
                if self.rng.random() < self.fault_rate:
                    card_fault_inject(self.state_dir, card_type=card.type, index=card.index)
        faults = faults_in(self.state_dir)
        reports: dict[str, list[CardHealth]] = {}
        for card in cards:
            fault = faults.get(_key(card.type, card.index))
            health = (CardHealth(card.index, FAILED, (HealthError(fault["code"], fault["message"], fault["at"]),))
                      if fault else CardHealth(card.index))
            reports.setdefault(card.type, []).append(health)
        return {card_type: HealthReport(tuple(health)) for card_type, health in reports.items()}


HealthSource = Callable[[Sequence[Card]], dict[str, HealthReport]]
