"""What a machine without Chromium gets: skipped browser tests that say how to install it, or a failure in CI."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser import chromium

REPOSITORY = Path(__file__).resolve().parents[2]


def test_without_chromium_the_browser_tests_are_skipped_with_the_install_hint():
    environment = {**os.environ, "HETEROFLOW_CHROMIUM": "/nonexistent/chromium", "CI": ""}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/browser/test_console.py", "-q", "-p", "no:xdist", "-rs"],
        cwd=REPOSITORY, env=environment, capture_output=True, text=True, timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert " skipped" in run.stdout and " passed" not in run.stdout and " error" not in run.stdout
    assert "apt-get install chromium" in run.stdout


def test_in_ci_a_missing_chromium_is_an_error_naming_the_fix(monkeypatch):
    monkeypatch.setenv("HETEROFLOW_CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", "true")
    assert chromium.in_ci()
    with pytest.raises(RuntimeError, match="apt-get install chromium"):
        chromium.required_chromium_path()
