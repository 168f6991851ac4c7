"""Without Chromium the browser tests are skipped with the way to get it; in CI (CI=true) they fail instead."""

import pytest

from tests.browser.chromium import INSTALL_HINT, chromium_path, in_ci


def pytest_collection_modifyitems(config, items):
    if chromium_path() is not None or in_ci():
        return
    skip = pytest.mark.skip(reason=INSTALL_HINT)
    for item in items:
        if item.get_closest_marker("browser"):
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    skipped = [report for report in terminalreporter.stats.get("skipped", []) if INSTALL_HINT in str(report.longrepr)]
    if skipped:
        terminalreporter.write_sep("!", f"{len(skipped)} browser tests skipped. {INSTALL_HINT}", yellow=True)
