"""HeteroFlow node agent: runs on GPU machines, so it imports no Django (standard library and requests only).

Entry point: ``python -m nodes.agent --server URL --token-file PATH [--runtime docker|simulated] [--interval 5]``.
"""

from .detectors import SimulatedDetector, fake_cards_for

__all__ = ["SimulatedDetector", "fake_cards_for"]
