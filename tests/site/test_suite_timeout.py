"""A test that hangs fails with its stacks instead of holding the whole run until CI's limit."""
import subprocess
import sys
import textwrap


def test_the_suite_gives_every_test_five_minutes(pytestconfig):
    assert float(pytestconfig.getini("timeout")) == 300


def test_a_hanging_test_fails_with_every_threads_stack_and_the_run_goes_on(tmp_path):
    (tmp_path / "test_hang.py").write_text(textwrap.dedent("""
        import threading

        def test_waits_for_a_thread_that_never_ends():
            never = threading.Event()
            waiter = threading.Thread(target=never.wait, name="forever-waiting-helper", daemon=True)
            waiter.start()
            waiter.join()

        def test_after_the_hang():
            pass
    """))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:xdist", "-p", "no:django", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), "-c", "/dev/null", "-o", "timeout=2", str(tmp_path / "test_hang.py")],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert "Timeout (>2.0s) from pytest-timeout" in result.stdout
    assert "Stack of forever-waiting-helper" in result.stdout
    assert "1 failed, 1 passed" in result.stdout
