"""Host load figures for the heartbeat, read from /proc (the agent deliberately has no psutil dependency)."""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")


class CpuSampler:
    """CPU busy percentage since the previous sample (since boot for the first one)."""

    def __init__(self, proc: Path = PROC) -> None:
        self.proc = proc
        self._previous = (0, 0)

    def percent(self) -> float:
        try:
            fields = [int(value) for value in (self.proc / "stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return 0.0
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        total = sum(fields)
        previous_idle, previous_total = self._previous
        self._previous = (idle, total)
        elapsed = total - previous_total
        return round(100.0 * (1 - (idle - previous_idle) / elapsed), 1) if elapsed > 0 else 0.0


def memory_used_mb(proc: Path = PROC) -> int:
    """Memory in use (total minus available), in MB; 0 when /proc/meminfo cannot be read."""
    try:
        info = dict(line.split(":", 1) for line in (proc / "meminfo").read_text().splitlines() if ":" in line)
        total_kb = int(info["MemTotal"].split()[0])
        available_kb = int(info["MemAvailable"].split()[0])
    except (OSError, KeyError, ValueError, IndexError):
        return 0
    return (total_kb - available_kb) // 1024


def memory_total_gb(proc: Path = PROC) -> int:
    """The host's memory in GB (rounded down, at least 1), for registering the node."""
    try:
        info = dict(line.split(":", 1) for line in (proc / "meminfo").read_text().splitlines() if ":" in line)
        return max(int(info["MemTotal"].split()[0]) // (1024 * 1024), 1)
    except (OSError, KeyError, ValueError, IndexError):
        return 1
