"""Scheduling diagnostics (design §12): what the cycle tried for each task and how the cluster looks to it."""
