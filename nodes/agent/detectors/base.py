"""What every vendor detector shares: the card record, the command runner and the never-crash contract."""

from __future__ import annotations

import logging
import re
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

logger = logging.getLogger(__name__)

CommandRunner = Callable[[Sequence[str]], str]
"""Runs a vendor CLI and returns its stdout; raises ``OSError`` (e.g. not installed) or
``subprocess.SubprocessError`` (non-zero exit, timeout) when the command does not succeed."""

NumaLookup = Callable[[str | None], int | None]
"""Maps a PCI bus id as printed by a vendor CLI (``None``: not printed) to the card's NUMA node, ``None`` if unknown."""

SYSFS_PCI_DEVICES = Path("/sys/bus/pci/devices")
COMMAND_TIMEOUT_SECONDS = 15.0

_BUS_ID = re.compile(r"(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


@dataclass(frozen=True)
class Card:
    """One accelerator card as reported in the heartbeat (field names are the API's)."""

    index: int
    uuid: str
    type: str
    model: str
    memory_total_mb: int
    memory_used_mb: int
    utilization: int
    temperature: int
    numa: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_command(argv: Sequence[str]) -> str:
    """The production :data:`CommandRunner`: run ``argv`` without a shell and return its stdout."""
    completed = subprocess.run(list(argv), capture_output=True, text=True, check=True, timeout=COMMAND_TIMEOUT_SECONDS)
    return completed.stdout


def sysfs_numa_node(bus_id: str | None, devices_dir: Path = SYSFS_PCI_DEVICES) -> int | None:
    """NUMA node of a PCI device from sysfs; ``None`` when the bus id is unknown or the kernel reports -1."""
    canonical = canonical_bus_id(bus_id)
    if canonical is None:
        return None
    try:
        node = int((devices_dir / canonical / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def no_numa(_bus_id: str | None) -> None:
    """A :data:`NumaLookup` for hosts (and tests) where NUMA placement is unknown."""
    return None


def canonical_bus_id(bus_id: str | None) -> str | None:
    """``00000000:07:00.0`` / ``0000:9D:00.0`` / ``2d:00.0`` -> ``0000:07:00.0`` (sysfs spelling), else ``None``."""
    match = _BUS_ID.search(bus_id or "")
    if match is None:
        return None
    domain, bus, device, function = match.groups()
    return f"{int(domain or '0', 16):04x}:{bus.lower()}:{device.lower()}.{function}"


def number(text: str) -> float:
    """First number in a CLI cell such as ``45C``, ``69W``, ``0 %`` or ``16384 MiB``; ``ValueError`` if none."""
    match = _NUMBER.search(text)
    if match is None:
        raise ValueError(f"no number in {text!r}")
    return float(match[0])


def optional_number(text: str) -> float | None:
    """Like :func:`number` but ``None`` for the CLIs' "not available" spellings (``N/A``, ``-``, empty)."""
    match = _NUMBER.search(text)
    return float(match[0]) if match else None


def fallback_uuid(gpu_type: str, index: int, bus_id: str | None) -> str:
    """A stable id for CLIs that print no UUID: the PCI address survives re-enumeration, the index does not."""
    canonical = canonical_bus_id(bus_id)
    return f"{gpu_type}-{canonical}" if canonical else f"{gpu_type}-{index}"


class Detector(ABC):
    """Finds one vendor's cards. :meth:`detect` never raises: a missing or broken CLI means "no such cards"."""

    gpu_type: ClassVar[str]

    def __init__(self, numa_lookup: NumaLookup = sysfs_numa_node) -> None:
        self.numa_lookup = numa_lookup

    def detect(self, runner: CommandRunner) -> list[Card]:
        try:
            return self.query(runner)
        except (OSError, subprocess.SubprocessError) as exc:
            logger.debug("%s: vendor CLI not usable: %s", self.gpu_type, exc)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            logger.warning("%s: vendor CLI output not understood, reporting no cards: %s", self.gpu_type, exc)
        return []

    @abstractmethod
    def query(self, runner: CommandRunner) -> list[Card]:
        """Run the vendor CLI and parse it; may raise, :meth:`detect` turns failures into ``[]``."""
