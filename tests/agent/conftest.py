"""Helpers for the node agent tests; nothing here touches Django or a database."""

from pathlib import Path

import pytest

from tests.shared_data import TOPOLOGY_CAPTURES

FIXTURES = Path(__file__).parent / "fixtures"
SHARED_TOPOLOGY_FIXTURES = TOPOLOGY_CAPTURES


@pytest.fixture
def fixture_text():
    def read(relative_path: str) -> str:
        return (FIXTURES / relative_path).read_text()
    return read
