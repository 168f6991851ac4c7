"""Card-health readers of the ten vendors (design §17.3), in the detectors' order (`nodes.agent.detectors`)."""

from __future__ import annotations

from nodes.agent.detectors.base import CommandRunner

from .ascend import AscendHealthReader
from .base import DEGRADED, FAILED, HEALTH_STATES, OK, CardHealth, HealthError, HealthReader, HealthReport, worst
from .biren import BirenHealthReader
from .cambricon import CambriconHealthReader
from .enflame import EnflameHealthReader
from .hygon import HygonHealthReader
from .iluvatar import IluvatarHealthReader
from .kunlun import KunlunHealthReader
from .metax import MetaxHealthReader
from .musa import MusaHealthReader
from .nvidia import NvidiaHealthReader

READER_CLASSES: tuple[type[HealthReader], ...] = (
    MusaHealthReader, HygonHealthReader, CambriconHealthReader, BirenHealthReader, AscendHealthReader,
    KunlunHealthReader, IluvatarHealthReader, NvidiaHealthReader, MetaxHealthReader, EnflameHealthReader,
)
READER_FOR_TYPE: dict[str, type[HealthReader]] = {cls.gpu_type: cls for cls in READER_CLASSES}


def read_health(gpu_types: set[str], runner: CommandRunner) -> dict[str, HealthReport]:
    """Each present vendor's health report (only vendors whose cards were detected are asked)."""
    return {gpu_type: READER_FOR_TYPE[gpu_type]().read(runner) for gpu_type in sorted(gpu_types)
            if gpu_type in READER_FOR_TYPE}


__all__ = [
    "DEGRADED", "FAILED", "HEALTH_STATES", "OK", "CardHealth", "HealthError", "HealthReader", "HealthReport",
    "READER_CLASSES", "READER_FOR_TYPE", "read_health", "worst",
]
