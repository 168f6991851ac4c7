"""Where the data several test packages read lies: inside the repository, so that a clone tests on its own."""

from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
TOPOLOGY_CAPTURES = REPOSITORY / "tests" / "fixtures" / "nvidia-smi-topo"
OPENB_TRACE = REPOSITORY / "data" / "traces" / "openb"
