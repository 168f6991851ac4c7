"""`make stop` (`local_services stop`) ends every process a `make run` started, also after honcho and the run itself
were killed with `kill -9`: real processes, a real port."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

from heteroflow_site import local_services

REPOSITORY = Path(__file__).resolve().parents[2]
HONCHO = Path(sys.executable).with_name("honcho")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _wait_until(condition, *, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def test_stop_after_a_kill_9_of_honcho_and_of_the_run_ends_every_process_and_frees_the_port(tmp_path):
    data_dir, port = tmp_path / "data", _free_port()
    procfile = tmp_path / "Procfile"
    procfile.write_text(f"web: {sys.executable} -m http.server {port} --bind 127.0.0.1\n"
                        f"worker: {sys.executable} -c 'import time; time.sleep(600)'\n")
    # The machine's PostgreSQL and Redis are named: no embedded server to wait for (their stop has its own tests).
    environment = {**os.environ, "HETEROFLOW_DATA_DIR": str(data_dir)}
    run = subprocess.Popen(
        [sys.executable, "-m", "heteroflow_site.local_services", "run", "--tracked", "--",
         str(HONCHO), "start", "-f", str(procfile)],
        cwd=REPOSITORY, env=environment, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_until(lambda: _answers(port))
        honcho = next(child for child in psutil.Process(run.pid).children() if "honcho" in " ".join(child.cmdline()))
        os.kill(honcho.pid, signal.SIGKILL)
        os.kill(run.pid, signal.SIGKILL)
        run.wait(30)
        time.sleep(0.5)
        assert _answers(port), "the web process outlives a kill -9 of honcho: the case make stop must handle"
        left_over = local_services.tracked_processes(data_dir)
        assert any(f"{port}" in process.cmdline() for process in left_over)

        stop = subprocess.run([sys.executable, "-m", "heteroflow_site.local_services", "stop"], cwd=REPOSITORY,
                              env=environment, capture_output=True, text=True, timeout=180)

        assert stop.returncode == 0, stop.stderr
        assert f"{len(left_over)} process(es) of a run ended" in stop.stdout
        assert not _answers(port)
        with socket.socket() as again:
            again.bind(("127.0.0.1", port))  # the port is free for the next run
        assert local_services.tracked_processes(data_dir) == []
    finally:
        for process in local_services.tracked_processes(data_dir):
            process.kill()
        local_services.stop_local_services(data_dir)
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)


def test_processes_of_another_data_folder_are_left_alone(tmp_path):
    environment = {**os.environ, local_services.RUN_MARKER: str((tmp_path / "elsewhere").resolve())}
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=environment)
    try:
        assert local_services.stop_tracked_processes(tmp_path / "data") == 0
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
