"""Argument types the benchmark commands share."""

import argparse


def counts(text: str) -> list[int]:
    """A comma-separated list of positive counts (instances, processes): each runs in turn."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of counts: {text!r}") from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"counts must be at least 1: {text!r}")
    return values
