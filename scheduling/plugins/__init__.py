"""The eight built-in scheduling plugins (SPEC §6), one folder each, kube-scheduler style."""
