"""``python -m nodes.agent --server URL --token-file PATH [...]``: the options are in `command_line`."""

from __future__ import annotations

import argparse
import logging
import signal
import threading

from .command_line import add_arguments, agent_from, run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m nodes.agent", description="HeteroFlow node agent")
    add_arguments(parser)
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    try:
        agent = agent_from(vars(args))
    except ValueError as error:
        parser.error(str(error))
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    run(agent, args.interval, stop)


if __name__ == "__main__":
    main()
