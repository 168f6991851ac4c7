"""Small array helpers the framework and its plugins share."""

import numpy as np


def clipped(values, low, high) -> np.ndarray:
    """`values` within [low, high], as np.clip gives them: its Python wrappers cost more than the work on the few
    rows or cards a scoring touches."""
    return np.minimum(np.maximum(values, low), high)
