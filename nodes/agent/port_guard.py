"""Keeping other tenants' containers off a task's published port (design §16.5).

Docker keeps containers of different bridge networks apart, but a published port is on the host: with the daemon's
default userland proxy, another tenant's container on the same node connects to `<node address>:<port>` as any
client of the internal network does, its packets entering the host's INPUT chain from its own bridge. The guard
drops them there: for each published port the owner tenant's bridge is let through and every other docker bridge
(`br-…`, `docker0`) dropped, so clients off the node and the owner's own containers reach the port, other tenants'
containers do not. (With the daemon's `"userland-proxy": false` such a connection is NATed to the container
instead, and docker's own isolation between bridge networks drops it.)

The rules live in a chain of their own, HETEROFLOW-PORTS, jumped to from INPUT, each tagged with the task's
container name, so releasing a task — an adopted one too, after an agent restart — removes its rules by that tag.
Without iptables or the right to change it (an agent not run as root) the guard says so once and the port stays
reachable as before (docs/node-confinement.md).
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from collections.abc import Callable, Sequence

logger = logging.getLogger(__name__)

CHAIN = "HETEROFLOW-PORTS"
# Every docker bridge an agent's containers may sit on: user-defined networks' `br-<id>`, and the default docker0.
DOCKER_BRIDGES = ("br-+", "docker0")
TOOLS = ("iptables", "ip6tables")

Command = Callable[[Sequence[str]], subprocess.CompletedProcess]


class PortGuard:
    def __init__(self, run: Command) -> None:
        self.run = run
        self._ready: set[str] = set()
        self._unavailable: set[str] = set()

    def admit_only(self, *, task_name: str, port: int, bridge: str | None, ipv6: bool = False) -> bool:
        """Let `port` be reached from `bridge` (the owner's; None when unknown: from no docker bridge) and from no
        other docker bridge. False when the rules could not be written."""
        tool = TOOLS[1] if ipv6 else TOOLS[0]
        if not self._chain_ready(tool):
            return False
        rules = ([(bridge, "RETURN")] if bridge else []) + [(other, "DROP") for other in DOCKER_BRIDGES]
        for interface, verdict in rules:
            written = self._call([tool, "-A", CHAIN, "-i", interface, "-p", "tcp", "--dport", str(port),
                                  "-m", "comment", "--comment", task_name, "-j", verdict])
            if written is None or written.returncode != 0:
                self._give_up(tool, written)
                return False
        return True

    def forget(self, task_name: str) -> None:
        """Remove every rule tagged with `task_name`."""
        for tool in TOOLS:
            if tool in self._unavailable:
                continue
            listed = self._call([tool, "-S", CHAIN])
            if listed is None or listed.returncode != 0:
                continue
            for line in listed.stdout.splitlines():
                words = shlex.split(line)
                if words[:2] == ["-A", CHAIN] and _tag(words) == task_name:
                    self._call([tool, "-D", *words[1:]])

    def _chain_ready(self, tool: str) -> bool:
        if tool in self._ready:
            return True
        if tool in self._unavailable:
            return False
        created = self._call([tool, "-N", CHAIN])
        if created is None or (created.returncode != 0 and "exists" not in created.stderr):
            self._give_up(tool, created)
            return False
        jumped = self._call([tool, "-C", "INPUT", "-j", CHAIN])
        if jumped is not None and jumped.returncode != 0:
            jumped = self._call([tool, "-I", "INPUT", "1", "-j", CHAIN])
        if jumped is None or jumped.returncode != 0:
            self._give_up(tool, jumped)
            return False
        self._ready.add(tool)
        return True

    def _call(self, argv: list[str]) -> subprocess.CompletedProcess | None:
        try:
            return self.run(argv)
        except OSError as error:  # no such tool on this host
            logger.debug("%s: %s", argv[0], error)
            return None

    def _give_up(self, tool: str, result: subprocess.CompletedProcess | None) -> None:
        self._unavailable.add(tool)
        why = "not installed" if result is None else (result.stderr or "").strip() or f"exit {result.returncode}"
        logger.warning("published ports are not guarded from other tenants' containers (%s: %s); see "
                       "docs/node-confinement.md", tool, why)


def _tag(words: list[str]) -> str | None:
    for position, word in enumerate(words[:-1]):
        if word == "--comment":
            return words[position + 1]
    return None
