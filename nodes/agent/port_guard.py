"""Keeping other tenants' containers off a task's published port (design §16.5).

Docker keeps containers of different bridge networks apart, but a published port is on the host, and a container
reaches its host's addresses like any client of the internal network. Depending on the daemon (its userland proxy,
its version) another tenant's container on the same node connecting to `<node address>:<port>` either enters the
host's INPUT chain from its own bridge (docker-proxy answers) or is NATed to the task's container and forwarded
from its bridge to the task's. The guard drops both, per published port: the owner tenant's bridge is let through,
every other docker bridge (`br-…`, `docker0`) dropped, so clients off the node and the owner's own containers
reach the port, other tenants' containers do not.

The rules live in chains of their own — HETEROFLOW-PORTS jumped to first from INPUT, HETEROFLOW-PORTS-FORWARD from
docker's DOCKER-USER (absent when docker manages no iptables; then nothing is NATed either) — each tagged with the
task's container name, so releasing a task, an adopted one too after an agent restart, removes its rules by that
tag. Without iptables or the right to change it (an agent not run as root) the guard says so once and the port
stays reachable as before (docs/node-confinement.md).
"""

from __future__ import annotations

import logging
import shlex
import subprocess
from collections.abc import Callable, Sequence

logger = logging.getLogger(__name__)

CHAIN = "HETEROFLOW-PORTS"
FORWARD_CHAIN = "HETEROFLOW-PORTS-FORWARD"
# Where each chain is jumped to from: the host's own input, and docker's hook into forwarded traffic.
PARENTS = {CHAIN: "INPUT", FORWARD_CHAIN: "DOCKER-USER"}
# Every docker bridge an agent's containers may sit on: user-defined networks' `br-<id>`, and the default docker0.
DOCKER_BRIDGES = ("br-+", "docker0")
TOOLS = ("iptables", "ip6tables")

Command = Callable[[Sequence[str]], subprocess.CompletedProcess]


class PortGuard:
    def __init__(self, run: Command) -> None:
        self.run = run
        self._ready: set[tuple[str, str]] = set()
        self._unavailable: set[tuple[str, str]] = set()

    def admit_only(self, *, task_name: str, port: int, bridge: str | None, ipv6: bool = False) -> bool:
        """Let `port` be reached from `bridge` (the owner's; None when unknown: from no docker bridge) and from no
        other docker bridge. False when the host's input could not be guarded."""
        tool = TOOLS[1] if ipv6 else TOOLS[0]
        tagged = ["-p", "tcp", "--dport", str(port), "-m", "comment", "--comment", task_name]
        allowed = [bridge] if bridge else []
        input_rules = [["-i", interface, *tagged, "-j", "RETURN"] for interface in allowed] + \
                      [["-i", interface, *tagged, "-j", "DROP"] for interface in DOCKER_BRIDGES]
        # Forwarded to the owner's bridge (or, unknown, to any docker bridge) from another one.
        targets = allowed or list(DOCKER_BRIDGES)
        forward_rules = [["-i", target, "-o", target, *tagged, "-j", "RETURN"] for target in allowed] + \
                        [["-i", interface, "-o", target, *tagged, "-j", "DROP"]
                         for target in targets for interface in DOCKER_BRIDGES]
        if not self._append(tool, CHAIN, input_rules, required=True):
            return False
        self._append(tool, FORWARD_CHAIN, forward_rules, required=False)
        return True

    def forget(self, task_name: str) -> None:
        """Remove every rule tagged with `task_name`."""
        for tool in TOOLS:
            for chain in PARENTS:
                if (tool, chain) in self._unavailable:
                    continue
                listed = self._call([tool, "-S", chain])
                if listed is None or listed.returncode != 0:
                    continue
                for line in listed.stdout.splitlines():
                    words = shlex.split(line)
                    if words[:2] == ["-A", chain] and _tag(words) == task_name:
                        self._call([tool, "-D", *words[1:]])

    def _append(self, tool: str, chain: str, rules: list[list[str]], *, required: bool) -> bool:
        if not self._chain_ready(tool, chain, required=required):
            return False
        for rule in rules:
            written = self._call([tool, "-A", chain, *rule])
            if written is None or written.returncode != 0:
                self._give_up(tool, chain, written, loudly=required)
                return False
        return True

    def _chain_ready(self, tool: str, chain: str, *, required: bool) -> bool:
        if (tool, chain) in self._ready:
            return True
        if (tool, chain) in self._unavailable:
            return False
        created = self._call([tool, "-N", chain])
        if created is None or (created.returncode != 0 and "exists" not in created.stderr):
            self._give_up(tool, chain, created, loudly=required)
            return False
        jumped = self._call([tool, "-C", PARENTS[chain], "-j", chain])
        if jumped is not None and jumped.returncode != 0:
            jumped = self._call([tool, "-I", PARENTS[chain], "1", "-j", chain])
        if jumped is None or jumped.returncode != 0:
            self._give_up(tool, chain, jumped, loudly=required)
            return False
        self._ready.add((tool, chain))
        return True

    def _call(self, argv: list[str]) -> subprocess.CompletedProcess | None:
        try:
            return self.run(argv)
        except OSError as error:  # no such tool on this host
            logger.debug("%s: %s", argv[0], error)
            return None

    def _give_up(self, tool: str, chain: str, result: subprocess.CompletedProcess | None, *, loudly: bool) -> None:
        self._unavailable.add((tool, chain))
        why = "not installed" if result is None else (result.stderr or "").strip() or f"exit {result.returncode}"
        if loudly:
            logger.warning("published ports are not guarded from other tenants' containers (%s: %s); see "
                           "docs/node-confinement.md", tool, why)
        else:
            logger.info("%s %s not written (%s): no docker NAT to guard", tool, chain, why)


def _tag(words: list[str]) -> str | None:
    for position, word in enumerate(words[:-1]):
        if word == "--comment":
            return words[position + 1]
    return None
