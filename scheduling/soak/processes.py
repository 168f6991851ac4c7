"""The real processes of a soak run, started, killed and restarted by name; each one's output in `logs/<name>.log`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STOP_SECONDS = 10.0


@dataclass
class Managed:
    name: str
    command: list[str]
    env: dict[str, str]
    log: Path
    process: subprocess.Popen | None = None
    starts: int = 0
    # Set while the soak keeps it down on purpose (a SIGSTOP, a Redis outage): not a process that died.
    held: bool = False

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None


@dataclass
class Supervisor:
    """Starts every process in its own session (a signal to one never reaches the soak), restarts what dies."""

    log_dir: Path
    processes: dict[str, Managed] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    def add(self, name: str, command: list[str], env: dict[str, str]) -> Managed:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        managed = self.processes[name] = Managed(name, command, env, self.log_dir / f"{name}.log")
        self.start(name)
        return managed

    def start(self, name: str) -> None:
        with self.lock:
            self._start(self.processes[name])

    def _start(self, managed: Managed) -> None:
        with open(managed.log, "a") as log:
            managed.process = subprocess.Popen(managed.command, cwd=REPOSITORY, env=managed.env, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True)
        managed.starts += 1
        managed.held = False

    def kill(self, name: str, sig: signal.Signals = signal.SIGKILL, *, children: bool = True) -> None:
        """Signal the process and, with `children`, everything it started (its process group)."""
        managed = self.processes[name]
        if managed.alive:
            if children:
                os.killpg(managed.process.pid, sig)
            else:
                managed.process.send_signal(sig)
            if sig in (signal.SIGKILL, signal.SIGTERM):
                managed.process.wait(STOP_SECONDS)

    def restart(self, name: str, *, children: bool = True) -> None:
        with self.lock:
            self.kill(name, children=children)
            self.start(name)

    def revive_dead(self) -> list[str]:
        """Start again every process that died without the soak holding it down; the names restarted."""
        with self.lock:
            dead = [name for name, managed in self.processes.items() if not managed.alive and not managed.held]
            for name in dead:
                self.start(name)
        return dead

    def stop_all(self) -> None:
        for managed in self.processes.values():
            if managed.alive:
                try:
                    os.killpg(managed.process.pid, signal.SIGCONT)
                    os.killpg(managed.process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + STOP_SECONDS
        for managed in self.processes.values():
            if managed.process is None:
                continue
            try:
                managed.process.wait(max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.killpg(managed.process.pid, signal.SIGKILL)
                managed.process.wait(STOP_SECONDS)

    def names(self, prefix: str) -> list[str]:
        return sorted(name for name in self.processes if name.startswith(prefix))


def manage(*arguments: str) -> list[str]:
    return [sys.executable, str(REPOSITORY / "manage.py"), *arguments]


def venv_tool(name: str, *arguments: str) -> list[str]:
    return [str(BIN / name), *arguments]
