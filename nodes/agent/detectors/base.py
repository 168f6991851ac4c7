"""What every vendor detector shares: the card record, the command runner, the fallback order and the never-crash
contract."""

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
_SIZE = re.compile(r"\s*(?P<value>\d+(?:\.\d+)?)\s*(?P<unit>[KMGT]i?B)?\s*", re.IGNORECASE)
# MB as the CLIs print it is MiB: xpu_smi 4.x's "8064 MB" and "32768 MB" are binary sizes (8 GiB less 128 MiB,
# 32 GiB), printed as MiB by the same vendor's later tools.
_MEBIBYTES_PER_UNIT = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}
PARSE_ERRORS = (ValueError, KeyError, IndexError, TypeError, AttributeError)


@dataclass(frozen=True)
class Card:
    """One accelerator card as its CLI printed it (field names are the API's); ``None`` is a reading the CLI did not
    print or printed as ``N/A``."""

    index: int
    uuid: str
    type: str
    model: str | None
    memory_total_mb: int | None
    memory_used_mb: int | None
    utilization: int | None
    temperature: int | None
    numa: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The card as the heartbeat sends it. The heartbeat API has no "unknown" for readings, so an unknown one
        goes as 0 (the model as ""), and memory in use counts as unknown when the size is."""
        body = asdict(self)
        if self.memory_total_mb is None:
            body["memory_used_mb"] = None
        for name in ("memory_total_mb", "memory_used_mb", "utilization", "temperature"):
            body[name] = body[name] or 0
        body["model"] = self.model or ""
        return body


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


def optional_number(text: str | float | None) -> float | None:
    """Like :func:`number` but ``None`` for the CLIs' "not available" spellings (``N/A``, ``-``, empty, not printed)."""
    match = _NUMBER.search("" if text is None else str(text))
    return float(match[0]) if match else None


def optional_int(text: str | float | None) -> int | None:
    """A reading such as ``45C``, ``35℃``, ``39 C``, ``0.0%`` or ``0 %`` as a whole number; ``None`` if unknown."""
    value = optional_number(text)
    return None if value is None else round(value)


def mebibytes(text: str | None, default_unit: str = "MiB") -> int | None:
    """``16384 MiB`` / ``8064 MB`` / ``147456MiB`` / ``64 GiB`` (or a bare number in ``default_unit``) in MiB;
    ``None`` for ``N/A`` or anything else that is not a size."""
    match = _SIZE.fullmatch(text or "")
    if match is None:
        return None
    unit = (match["unit"] or default_unit)[0].lower()
    return round(float(match["value"]) * _MEBIBYTES_PER_UNIT[unit])


def used_and_total_mb(text: str) -> tuple[int | None, int | None]:
    """A memory cell in MiB: ``0 MiB/ 23374 MiB``, ``0MiB / 32512MiB``, ``504 / 8064 MB`` (the used figure takes the
    total's unit), or a size alone (``147456MiB``: nothing says how much is used)."""
    parts = text.replace("N/A", "NA").split("/")
    if len(parts) == 1:
        return None, mebibytes(parts[0])
    if len(parts) != 2:
        raise ValueError(f"not a used/total memory reading: {text!r}")
    total_unit = _SIZE.fullmatch(parts[1])
    return mebibytes(parts[0], (total_unit and total_unit["unit"]) or "MiB"), mebibytes(parts[1])


def pci_vendor_present(vendor_id: str, devices_dir: Path = SYSFS_PCI_DEVICES) -> bool:
    """Whether a PCI device of ``vendor_id`` (sysfs spelling, e.g. ``0x1d22``) is on this host."""
    try:
        devices = list(devices_dir.iterdir())
    except OSError:
        return False
    for device in devices:
        try:
            if (device / "vendor").read_text().strip().lower() == vendor_id:
                return True
        except OSError:
            continue
    return False


def fallback_uuid(gpu_type: str, index: int, bus_id: str | None) -> str:
    """A stable id for CLIs that print no UUID: the PCI address survives re-enumeration, the index does not."""
    canonical = canonical_bus_id(bus_id)
    return f"{gpu_type}-{canonical}" if canonical else f"{gpu_type}-{index}"


class Detector(ABC):
    """Finds one vendor's cards. :meth:`detect` never raises: a missing or broken CLI means "no such cards"."""

    gpu_type: ClassVar[str]
    commands: ClassVar[tuple[tuple[str, ...], ...]] = ()
    """The command lines to try, best first: the first whose output :meth:`parse` reads as cards is the answer."""

    def __init__(self, numa_lookup: NumaLookup = sysfs_numa_node) -> None:
        self.numa_lookup = numa_lookup

    def detect(self, runner: CommandRunner) -> list[Card]:
        try:
            return self.query(runner)
        except (OSError, subprocess.SubprocessError) as exc:
            logger.debug("%s: vendor CLI not usable: %s", self.gpu_type, exc)
        except PARSE_ERRORS as exc:
            logger.warning("%s: vendor CLI output not understood, reporting no cards: %s", self.gpu_type, exc)
        return []

    def query(self, runner: CommandRunner) -> list[Card]:
        """Try :attr:`commands` in order; one that is missing, fails, prints what :meth:`parse` does not understand
        or shows no cards hands over to the next. May raise the last failure; :meth:`detect` makes that ``[]``."""
        failure: Exception | None = None
        for argv in self.commands:
            try:
                cards = self.parse(runner(argv))
            except (OSError, subprocess.SubprocessError, *PARSE_ERRORS) as exc:
                logger.debug("%s: %s gave no cards: %s", self.gpu_type, " ".join(argv), exc)
                failure = exc
                continue
            if cards:
                return cards
        if failure is not None:
            raise failure
        return []

    @abstractmethod
    def parse(self, text: str) -> list[Card]:
        """The cards in a saved output of any of this vendor's :attr:`commands`; may raise on output it cannot read."""
