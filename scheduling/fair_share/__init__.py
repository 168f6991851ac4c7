"""Sharing the cluster fairly (design §16.2): usage per GPU type, per-type nominal quotas, cohorts that lend and
reclaim, fair-share order."""
