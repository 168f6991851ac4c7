"""Vendor card detectors, in the fixed detection priority of a mixed node (design §1).

musa → hygon → cambricon → biren → ascend → kunlun → iluvatar → nvidia → metax → enflame
"""

from __future__ import annotations

from collections.abc import Sequence

from .ascend import AscendDetector
from .base import Card, CommandRunner, Detector, NumaLookup, run_command, sysfs_numa_node
from .biren import BirenDetector
from .cambricon import CambriconDetector
from .enflame import EnflameDetector
from .hygon import HygonDetector
from .iluvatar import IluvatarDetector
from .kunlun import KunlunDetector
from .metax import MetaxDetector
from .musa import MusaDetector
from .nvidia import NvidiaDetector
from .simulated import SimulatedDetector, fake_cards_for

DETECTOR_CLASSES: tuple[type[Detector], ...] = (
    MusaDetector, HygonDetector, CambriconDetector, BirenDetector, AscendDetector,
    KunlunDetector, IluvatarDetector, NvidiaDetector, MetaxDetector, EnflameDetector,
)
GPU_TYPES: tuple[str, ...] = tuple(cls.gpu_type for cls in DETECTOR_CLASSES)
DETECTOR_FOR_TYPE: dict[str, type[Detector]] = {cls.gpu_type: cls for cls in DETECTOR_CLASSES}


def default_detectors(numa_lookup: NumaLookup = sysfs_numa_node) -> list[Detector]:
    return [cls(numa_lookup) for cls in DETECTOR_CLASSES]


def detect_all(runner: CommandRunner = run_command, detectors: Sequence[Detector] | None = None) -> list[Card]:
    """Cards of every vendor present, vendors in priority order, each vendor's cards in its CLI's order."""
    chosen = default_detectors() if detectors is None else detectors
    return [card for detector in chosen for card in detector.detect(runner)]


__all__ = [
    "Card", "CommandRunner", "Detector", "DETECTOR_CLASSES", "DETECTOR_FOR_TYPE", "GPU_TYPES", "SimulatedDetector",
    "default_detectors", "detect_all", "fake_cards_for", "run_command",
]
