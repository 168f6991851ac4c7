"""The scheduling framework, modelled on kube-scheduler's: plain Python over an in-memory snapshot.

Nothing in this package touches the ORM. The snapshot is built from the database once per cycle
(`scheduling.snapshot_builder`) and plugins only read it; binding is the one step that writes.
"""
