"""The scheduling framework, modelled on kube-scheduler's: plain Python over an in-memory snapshot.

Nothing in this package touches the ORM, imports a plugin or another app. The snapshot is built from the database
once per cycle (`scheduling.cache.snapshot_builder`), plugins only read it, and binding (`scheduling.bind`) is the one
step that writes. `framework.Framework` runs every extension point (`interfaces`); the plugins live in
`scheduling.plugins` and reach the framework through the registry (`registry`).
"""
