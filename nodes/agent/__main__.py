"""``python -m nodes.agent --server URL --token TOKEN [--runtime docker|simulated] [--interval 5]``"""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from .agent import Agent
from .client import AgentClient
from .runtime import DockerRuntime, Runtime, SimulatedRuntime

RUNTIMES: dict[str, type[DockerRuntime] | type[SimulatedRuntime]] = {
    "docker": DockerRuntime, "simulated": SimulatedRuntime,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m nodes.agent", description="HeteroFlow node agent")
    parser.add_argument("--server", required=True, help="control plane base URL, e.g. http://10.0.0.1:8000")
    parser.add_argument("--token", required=True, help="node token returned by /api/v1/agent/register")
    parser.add_argument("--runtime", choices=sorted(RUNTIMES), default="docker")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between heartbeats")
    parser.add_argument("--state-dir", help="simulated runtime: where it records its processes, so that a "
                                            "restarted agent adopts them")
    parser.add_argument("--label", action="append", default=[], metavar="KEY=VALUE",
                        help="extra node label sent with every heartbeat (repeatable), e.g. rdma=true")
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    if any("=" not in label for label in args.label):
        parser.error("--label takes KEY=VALUE")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    runtime: Runtime = SimulatedRuntime(args.state_dir) if args.runtime == "simulated" else DockerRuntime()
    labels = dict(label.split("=", 1) for label in args.label)
    agent = Agent(AgentClient(args.server, args.token), runtime, extra_labels=labels)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        agent.run_forever(args.interval, stop)
    finally:
        agent.close()


if __name__ == "__main__":
    main()
