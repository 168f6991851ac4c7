"""What every vendor's card-health reader shares (design §17.3): the verdicts, the report, the merge of several
commands' readings and the rule that a tool which cannot reach the cards is a `failed` verdict, never "healthy".

A reader runs its vendor's tool(s), reads the output as it was published (tests/fixtures/vendor-health/) and says per
card `ok`, `degraded` (works, but a counter or state says it is wearing out or needs a reset) or `failed` (must take
no work), with the errors that led there.
"""

from __future__ import annotations

import logging
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, ClassVar

from nodes.agent.detectors.base import PARSE_ERRORS, CommandRunner, canonical_bus_id

logger = logging.getLogger(__name__)

OK, DEGRADED, FAILED = "ok", "degraded", "failed"
HEALTH_STATES = (OK, DEGRADED, FAILED)
_RANK = {state: rank for rank, state in enumerate(HEALTH_STATES)}
TOOL_FAILURE = "tool-failure"


def worst(states: Iterable[str]) -> str:
    return max(states, key=_RANK.__getitem__, default=OK)


@dataclass(frozen=True)
class HealthError:
    code: str
    message: str
    # ISO 8601 when the tool printed a wall-clock time (a kernel log in `--time-format=iso`); else unknown.
    at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "at": self.at}


@dataclass(frozen=True)
class CardHealth:
    """One card's health. `index` is the vendor's card index; `None` when the output names the card only by its PCI
    address (a kernel log), which `HealthReport.merged` then matches to an indexed reading of the same address."""

    index: int | None
    health: str = OK
    errors: tuple[HealthError, ...] = ()
    bus_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        body = {"index": self.index, "health": self.health, "errors": [error.to_json() for error in self.errors]}
        if self.index is None and self.bus_id:
            body["bus_id"] = self.bus_id
        return body


@dataclass(frozen=True)
class HealthReport:
    cards: tuple[CardHealth, ...] = ()
    # Problems not tied to one card: the tool's own failure, a kernel-log event for an address no card has.
    errors: tuple[HealthError, ...] = ()
    node_health: str = OK

    @property
    def verdict(self) -> str:
        """The worst of every card and of the node-level readings."""
        return worst([self.node_health, *(card.health for card in self.cards)])

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "cards": [card.to_json() for card in self.cards],
                "errors": [error.to_json() for error in self.errors]}

    def for_card(self, index: int) -> CardHealth:
        """A card's health as the heartbeat sends it: its own reading, or — when the tool could not reach the cards
        at all — the tool's failure."""
        own = next((card for card in self.cards if card.index == index), None)
        if own is not None:
            return own
        if self.node_health == FAILED:
            return CardHealth(index, FAILED, self.errors)
        return CardHealth(index)

    @classmethod
    def tool_failure(cls, message: str) -> HealthReport:
        return cls(errors=(HealthError(TOOL_FAILURE, message),), node_health=FAILED)

    @classmethod
    def merged(cls, reports: Sequence[HealthReport]) -> HealthReport:
        """Several commands' readings of one vendor's cards as one: per card the worst health and every error;
        readings known only by PCI address join the card of that address, or stay node-level errors."""
        by_index: dict[int, CardHealth] = {}
        by_bus: dict[str, int] = {}
        loose: list[CardHealth] = []
        node_errors: list[HealthError] = []
        node_health = OK
        for report in reports:
            node_errors.extend(report.errors)
            node_health = worst([node_health, report.node_health])
            for card in report.cards:
                if card.index is None:
                    loose.append(card)
                    continue
                by_index[card.index] = _combine(by_index.get(card.index), card)
                if canonical_bus_id(card.bus_id):
                    by_bus[canonical_bus_id(card.bus_id)] = card.index
        for card in loose:
            index = by_bus.get(canonical_bus_id(card.bus_id) or "")
            if index is not None:
                by_index[index] = _combine(by_index[index], replace(card, index=index))
            else:
                node_errors.extend(card.errors)
                node_health = worst([node_health, card.health])
        return cls(tuple(by_index[index] for index in sorted(by_index)), tuple(node_errors), node_health)


def _combine(before: CardHealth | None, card: CardHealth) -> CardHealth:
    if before is None:
        return card
    return CardHealth(card.index, worst([before.health, card.health]), before.errors + card.errors,
                      before.bus_id or card.bus_id)


@dataclass
class CardFinding:
    """Built while one card's output is read: the worst health so far and the errors behind it."""

    health: str = OK
    errors: list[HealthError] = field(default_factory=list)

    def note(self, health: str, code: str, message: str, at: str | None = None) -> None:
        self.health = worst([self.health, health])
        self.errors.append(HealthError(code, message, at))

    def card(self, index: int | None, bus_id: str | None = None) -> CardHealth:
        return CardHealth(index, self.health, tuple(self.errors), bus_id)


def count(text: str | None) -> int:
    """An error counter as printed (`0`, `7627`, `N/A`, `[N/A]`, `-`); unknown counts as 0, it says nothing bad."""
    try:
        return int(str(text).split()[0]) if text is not None else 0
    except (ValueError, IndexError):
        return 0


class HealthReader(ABC):
    """Reads one vendor's card health. `commands` all run and their readings merge; a reading that fails to run or
    parse is skipped, but when none of them gives a reading the verdict is `failed` (design §17.3: a tool that cannot
    reach the cards does not say they are healthy). `optional_commands` (a kernel log) add to a reading and are
    never a failure."""

    gpu_type: ClassVar[str]
    commands: ClassVar[tuple[tuple[str, ...], ...]] = ()
    optional_commands: ClassVar[tuple[tuple[str, ...], ...]] = ()

    def __init__(self, now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.now = now

    def read(self, runner: CommandRunner) -> HealthReport:
        reports, failures = [], []
        for argv in self.commands:
            try:
                reports.append(self.parse(runner(argv)))
            except (OSError, subprocess.SubprocessError, *PARSE_ERRORS) as exc:
                failures.append(f"{' '.join(argv)}: {_why(exc)}")
        if not reports:
            return HealthReport.tool_failure("; ".join(failures) or "no health command")
        for argv in self.optional_commands:
            try:
                reports.append(self.recent(self.parse(runner(argv))))
            except (OSError, subprocess.SubprocessError, *PARSE_ERRORS) as exc:
                logger.debug("%s: %s unreadable: %s", self.gpu_type, " ".join(argv), exc)
        return HealthReport.merged(reports)

    def recent(self, report: HealthReport) -> HealthReport:
        """What of an optional command's reading still matters now (a kernel log keeps events until reboot)."""
        return report

    @abstractmethod
    def parse(self, text: str) -> HealthReport:
        """The health in a saved output of any of this vendor's commands; raises on output it cannot read."""


def _why(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        printed = (exc.stdout or "") + (exc.stderr or "") if isinstance(exc.stdout, str) else ""
        return printed.strip().splitlines()[0] if printed.strip() else f"exit status {exc.returncode}"
    return str(exc) or type(exc).__name__
