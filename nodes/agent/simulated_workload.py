"""The stand-in process of the simulated runtime: it prints what such a task would (a training loop's progress, an
inference server's start-up and requests, a batch job's shards) for the given time, then exits with the given code.

Run by path, not as a module (``python simulated_workload.py …``): it imports nothing of the project, so it starts
whatever the agent's working directory. Its output is what the agent ships as the task's log (design §16.4), so the
demo shows logs. Lines are flushed as printed, as a real process writing to a file would with line buffering.
"""

import argparse
import os
import random
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LINES_PER_SECOND = 2.0


def training(rng: random.Random, steps: int, args) -> "iter[str]":
    world = max(1, len(args.gpus.split(","))) if args.gpus else 1
    yield f"[rank 0] initializing process group: backend=nccl world_size={world} cards={args.gpus or 'cpu'}"
    yield "loading dataset shards from /data/train (1024 files) ... done"
    yield f"model: 1.3B parameters, micro batch 8, gradient accumulation 4, {steps} steps"
    loss = rng.uniform(2.4, 3.2)
    for step in range(1, steps + 1):
        loss *= rng.uniform(0.93, 0.995)
        throughput = rng.uniform(380, 460) * world
        yield (f"epoch {1 + (step - 1) * 3 // max(steps, 1)}/3 step {step}/{steps} loss {loss:.4f} "
               f"lr {3e-4 * min(1.0, step / 5):.2e} throughput {throughput:.1f} samples/s")
        if step % 10 == 0:
            yield f"saving checkpoint to /checkpoints/step-{step:06d}.pt"


def inference(rng: random.Random, steps: int, args) -> "iter[str]":
    port = args.port or 8000
    for shard in range(1, 5):
        yield f"INFO:     loading model weights (shard {shard}/4) onto cards {args.gpus or 'cpu'}"
    yield f"INFO:     model ready in {rng.uniform(8, 25):.1f} s"
    yield f"INFO:     Uvicorn running on http://0.0.0.0:{port} (Press CTRL+C to quit)"
    for _ in range(steps):
        client = f"10.0.{rng.randrange(256)}.{rng.randrange(1, 255)}:{rng.randrange(30000, 60000)}"
        yield (f'INFO:     {client} - "POST /v1/completions HTTP/1.1" 200 OK '
               f"({rng.randrange(20, 900)} tokens, {rng.uniform(0.05, 2.5):.2f} s)")


def batch(rng: random.Random, steps: int, args) -> "iter[str]":
    yield f"job started: {steps} shards to process"
    for shard in range(1, steps + 1):
        yield f"shard {shard}/{steps}: {rng.randrange(8000, 12000)} records processed, {rng.randrange(0, 3)} skipped"


KINDS = {"training": training, "inference": inference, "batch": batch}


def load_share(load_file: str, task_id: int) -> float:
    """This replica's even share of the load in `load_file` among the replicas serving from it (each holds a marker
    in `<load_file>.replicas/` while it serves)."""
    try:
        with open(load_file) as written:
            total = float(written.read().strip() or 0)
        sharing = len(os.listdir(load_file + ".replicas"))
    except (OSError, ValueError):
        return 0.0
    return total / max(sharing, 1)


def serve(port_file: str, ready_after: float, unready_after: float | None, task_id: int = 0, load_file: str = "",
          metric_name: str = "") -> None:
    """Answer every GET on a free loopback port (written to `port_file` for the runtime's probe): 503 for the first
    `ready_after` seconds (loading the model), then 200, then 503 again from `unready_after` on (a server that
    wedged). Several simulated nodes share one host, so the published port itself could be taken twice.
    With a `load_file`, `/metrics` answers in Prometheus text `metric_name` = this replica's share of the load."""
    started = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/metrics" and load_file:
                body = (f"# TYPE {metric_name} gauge\n"
                        f"{metric_name} {load_share(load_file, task_id):.6f}\n").encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            age = time.monotonic() - started
            ready = age >= ready_after and (unready_after is None or age < unready_after)
            self.send_response(200 if ready else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass  # the task's output is its own lines, not the probe's

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with open(port_file + ".tmp", "w") as written:
        written.write(str(server.server_address[1]))
    os.replace(port_file + ".tmp", port_file)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task-id", type=int, required=True)
    parser.add_argument("--kind", choices=sorted(KINDS), default="batch")
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--exit-code", type=int, default=0)
    parser.add_argument("--exit-file", default="")
    # Seconds it takes to wind down once asked to stop.
    parser.add_argument("--stop-seconds", type=float, default=0.0)
    parser.add_argument("--gpus", default="")
    parser.add_argument("--port", type=int, default=None)
    # Inference stand-ins answer readiness probes (design §17.2) when given where to write their port.
    parser.add_argument("--serve-port-file", default="")
    parser.add_argument("--ready-after", type=float, default=0.0)
    parser.add_argument("--unready-after", type=float, default=None)
    # The simulated load it takes a share of, reported on `/metrics` (design §17.2, the autoscaler's metric).
    parser.add_argument("--load-file", default="")
    parser.add_argument("--metric-name", default="requests_per_second")
    # The task's container name: it marks the process's command line, so adoption can tell it from a process that
    # reused its pid.
    parser.add_argument("name")
    args = parser.parse_args()

    marker = f"{args.load_file}.replicas/{args.task_id}" if args.load_file else ""

    def leave_the_load() -> None:
        if marker:
            try:
                os.unlink(marker)
            except OSError:
                pass

    def stopped(signum, frame):
        print("received SIGTERM: saving state and exiting", flush=True)
        leave_the_load()
        time.sleep(args.stop_seconds)
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, stopped)
    if marker:
        os.makedirs(os.path.dirname(marker), exist_ok=True)
        open(marker, "w").close()
    if args.serve_port_file:
        serve(args.serve_port_file, args.ready_after, args.unready_after, args.task_id, args.load_file,
              args.metric_name)
    deadline = time.monotonic() + args.seconds
    steps = max(1, int(args.seconds * LINES_PER_SECOND))
    rng = random.Random(args.task_id)
    for line in KINDS[args.kind](rng, steps, args):
        print(line, flush=True)
        time.sleep(max(0.0, min(1 / LINES_PER_SECOND, deadline - time.monotonic())))
    time.sleep(max(0.0, deadline - time.monotonic()))
    if args.exit_code:
        print("Traceback (most recent call last):\n  File \"main.py\", line 87, in <module>\n"
              f"RuntimeError: simulated failure (exit code {args.exit_code})", file=sys.stderr, flush=True)
    else:
        print("finished", flush=True)
    leave_the_load()
    if args.exit_file:
        with open(args.exit_file, "w") as exit_file:
            exit_file.write(str(args.exit_code))
    sys.exit(args.exit_code)


if __name__ == "__main__":
    main()
