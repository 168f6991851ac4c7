"""Where the project's shared data (real captures, production traces) lies: `shared/` beside the checkout."""

import os
from pathlib import Path

SHARED_DIR = Path(os.environ.get("HETEROFLOW_SHARED_DIR", Path(__file__).resolve().parents[2] / "shared"))
TOPOLOGY_CAPTURES = SHARED_DIR / "fixtures" / "nvidia-smi-topo"
