"""Several Daphne processes on one port (`heteroflow_site.web_workers`), as compose runs the web tier."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest
import requests

from scheduling.bench.network import free_port
from tests.processes import PROJECT, process_environment


def _started_pids(log_path) -> list[int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = re.search(r"Daphne process\(es\) on [\d.]+:\d+, pids ([\d ]+)$", log_path.read_text(), re.MULTILINE)
        if found:
            return [int(pid) for pid in found.group(1).split()]
        time.sleep(0.1)
    raise AssertionError(log_path.read_text())


def _answers(base: str, log_path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            assert requests.get(f"{base}/healthz", timeout=10).status_code == 200
            return
        except (requests.ConnectionError, requests.Timeout):
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(0.2)


@pytest.mark.django_db
def test_two_processes_serve_one_port_a_dead_one_is_replaced_and_sigterm_stops_them_all(tmp_path):
    port = free_port()
    log_path = tmp_path / "web.log"
    with log_path.open("wb") as log:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "heteroflow_site.web_workers", "--port", str(port), "--processes", "2", "-v", "0"],
            cwd=PROJECT, env=process_environment(DATABASE_POOL="true"), stdout=log, stderr=subprocess.STDOUT)
        try:
            workers = _started_pids(log_path)
            base = f"http://127.0.0.1:{port}"
            _answers(base, log_path)
            assert len(workers) == 2

            os.kill(workers[0], signal.SIGKILL)
            deadline = time.monotonic() + 30
            while f"process {workers[0]} exited" not in log_path.read_text():
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.1)
            for _ in range(6):
                _answers(base, log_path)

            supervisor.send_signal(signal.SIGTERM)
            assert supervisor.wait(timeout=60) == 0
            for pid in workers[1:]:
                with pytest.raises(ProcessLookupError):
                    os.kill(pid, 0)
        finally:
            if supervisor.poll() is None:
                supervisor.kill()
                supervisor.wait()


def test_a_port_taken_is_a_one_line_refusal():
    import socket

    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        finished = subprocess.run([sys.executable, "-m", "heteroflow_site.web_workers", "--port", str(port)],
                                  cwd=PROJECT, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in finished.stderr
