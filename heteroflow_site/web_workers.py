"""Several Daphne processes serving one port: the web tier of a machine with more than one core.

    python -m heteroflow_site.web_workers --bind 0.0.0.0 --port 8000 --processes 2 [daphne options]

binds the listening socket once and starts that many Daphne processes on it (Daphne's `--fd` option): the kernel hands each
new connection to one of them, so one port needs no load balancer in front. A worker that exits is started again
(a second later, so a crash loop does not spin); SIGTERM or SIGINT stops every worker, then this process.
Websockets behave as with one process: the Channels layer (Redis) carries group messages between the processes,
and every worker runs the same settings (the database pool is per process: `DATABASE_POOL_MAX_SIZE` each).
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import time

RESTART_DELAY_SECONDS = 1.0
STOP_SECONDS = 30
APPLICATION = "heteroflow_site.asgi:application"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m heteroflow_site.web_workers", description=__doc__.split("\n")[0])
    parser.add_argument("--bind", default="127.0.0.1", help="an IPv4 address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--processes", type=int, default=int(os.environ.get("WEB_PROCESSES", "1")),
                        help="Daphne processes on the port (default: WEB_PROCESSES, else 1)")
    options, daphne_options = parser.parse_known_args(argv)
    if options.processes < 1:
        parser.error("--processes must be at least 1")
    try:
        listener = socket.create_server((options.bind, options.port), family=socket.AF_INET, backlog=1024)
    except (OSError, socket.gaierror) as error:
        parser.error(f"cannot listen on {options.bind}:{options.port}: {error}")
    command = [sys.executable, "-m", "daphne", "--fd", str(listener.fileno()), *daphne_options, APPLICATION]
    return _supervise(command, listener, options.processes)


def _supervise(command: list[str], listener: socket.socket, processes: int) -> int:
    stopping = False

    def stop(signum, frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    workers = [_start(command, listener) for _ in range(processes)]
    print(f"web: {processes} Daphne process(es) on {listener.getsockname()[0]}:{listener.getsockname()[1]}, "
          f"pids {' '.join(str(worker.pid) for worker in workers)}", file=sys.stderr, flush=True)
    while not stopping:
        for position, worker in enumerate(workers):
            if worker.poll() is not None and not stopping:
                print(f"web: process {worker.pid} exited with {worker.returncode}; starting another",
                      file=sys.stderr, flush=True)
                time.sleep(RESTART_DELAY_SECONDS)
                workers[position] = _start(command, listener)
        time.sleep(0.2)
    for worker in workers:
        if worker.poll() is None:
            worker.terminate()
    deadline = time.monotonic() + STOP_SECONDS
    for worker in workers:
        try:
            worker.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    return 0


def _start(command: list[str], listener: socket.socket) -> subprocess.Popen:
    return subprocess.Popen(command, pass_fds=(listener.fileno(),))


if __name__ == "__main__":
    sys.exit(main())
