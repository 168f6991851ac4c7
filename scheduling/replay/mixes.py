"""Trace mixes (`replay_trace --mix`, design §15.9): pod lists derived from a trace with more shared cards, more
multi-card tasks or more GPU-model constraints, to check a layout policy on workloads it was not tuned on.

Like openb's own variants (gpushare40, multigpu20, gpuspec33), a mix keeps the trace's tasks and changes their
proportions: every pod without GPU stays; each GPU pod is replaced by a pod drawn from the trace's pods of the class
the mix asks for — shared (a fraction of one card), multi-card (2 or more cards) or the rest — so the CPU, memory
and size of each class are the trace's own. `constrained` then gives that fraction of the GPU pods a `gpu_spec`: one
model, drawn in proportion to the GPUs of that model among the nodes that can hold the pod's cards. A mix is
a function of the trace, the nodes, the fractions and `seed`: its command line is its provenance.

`--mix shared=0.6,multi=0.3,constrained=0.5,seed=1` (any of the fractions; seed 0 when left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from scheduling.replay.trace import TraceError, TraceNode, TracePod

FRACTIONS = ("shared", "multi", "constrained")


@dataclass(frozen=True)
class Mix:
    shared: float | None = None        # of the GPU pods, the fraction that share a card
    multi: float | None = None         # of the GPU pods, the fraction asking 2 or more cards
    constrained: float | None = None   # of the GPU pods, the fraction with a GPU-model constraint
    seed: int = 0

    @classmethod
    def parse(cls, text: str) -> Mix:
        """`shared=0.6,multi=0.3,constrained=0.5,seed=1`, any of them; a TraceError names what is wrong."""
        values: dict[str, float | int] = {}
        for part in (part.strip() for part in text.split(",") if part.strip()):
            key, _, raw = part.partition("=")
            key = key.strip()
            if key not in (*FRACTIONS, "seed") or not raw.strip():
                raise TraceError(f"--mix: {part!r} is not one of {', '.join(FRACTIONS)}, seed as key=value")
            try:
                values[key] = int(raw) if key == "seed" else float(raw)
            except ValueError:
                raise TraceError(f"--mix: {key} must be a number, not {raw.strip()!r}") from None
            if key != "seed" and not 0 <= values[key] <= 1:
                raise TraceError(f"--mix: {key} must be a fraction from 0 to 1, not {raw.strip()}")
        if not any(key in values for key in FRACTIONS):
            raise TraceError(f"--mix: give at least one of {', '.join(FRACTIONS)}")
        return cls(**values)

    def label(self) -> str:
        return ",".join(f"{key}={getattr(self, key):g}" for key in FRACTIONS if getattr(self, key) is not None) \
            + f",seed={self.seed}"


def mixed_pods(pods: Sequence[TracePod], nodes: Sequence[TraceNode], mix: Mix) -> list[TracePod]:
    """`pods` with the proportions of `mix` (same count; names kept, so each pod is still named by its row)."""
    rng = np.random.default_rng(mix.seed)
    gpu = [pod for pod in pods if pod.gpu_demand_milli]
    shared = [pod for pod in gpu if pod.shared]
    multi = [pod for pod in gpu if not pod.shared and pod.num_gpu >= 2]
    single = [pod for pod in gpu if not pod.shared and pod.num_gpu == 1]
    for fraction, pool, name in ((mix.shared, shared, "shared"), (mix.multi, multi, "multi-card")):
        if fraction and not pool:
            raise TraceError(f"--mix: the trace has no {name} pods to draw from")
    result = []
    for pod in pods:
        if not pod.gpu_demand_milli:
            result.append(pod)
            continue
        drawn = _draw(pod, rng, mix, shared=shared, multi=multi, single=single)
        result.append(replace(drawn, name=pod.name, creation_time=pod.creation_time,
                              deletion_time=pod.deletion_time))
    if mix.constrained:
        result = _constrain(result, nodes, mix.constrained, rng)
    return result


def _draw(pod: TracePod, rng: np.random.Generator, mix: Mix, *, shared: list[TracePod], multi: list[TracePod],
          single: list[TracePod]) -> TracePod:
    """The pod's replacement: a pod of the class the mix draws for it (its own class where the mix says nothing)."""
    if mix.multi is not None:
        if rng.random() < mix.multi:
            return multi[rng.integers(len(multi))]
        if pod.num_gpu >= 2 and not pod.shared:
            pod = (shared + single)[rng.integers(len(shared) + len(single))]
    if mix.shared is not None and not (pod.num_gpu >= 2 and not pod.shared):
        # Among the one-card pods: shared with the probability that makes `shared` of all GPU pods shared.
        one_card = 1.0 - (mix.multi if mix.multi is not None else len(multi) / max(len(multi) + len(shared)
                                                                                   + len(single), 1))
        chance = min(mix.shared / one_card, 1.0) if one_card > 0 else 0.0
        pool = shared if rng.random() < chance else single
        return pool[rng.integers(len(pool))] if pool else pod
    return pod


def _constrain(pods: list[TracePod], nodes: Sequence[TraceNode], fraction: float,
               rng: np.random.Generator) -> list[TracePod]:
    gpus_by_model: dict[str, dict[int, int]] = {}
    for node in nodes:
        by_size = gpus_by_model.setdefault(node.model, {})
        by_size[node.gpus] = by_size.get(node.gpus, 0) + node.gpus
    models = sorted(gpus_by_model)
    result = []
    for pod in pods:
        if pod.gpu_demand_milli and rng.random() < fraction:
            cards = max(pod.num_gpu, 1)
            weights = np.array([sum(gpus for size, gpus in gpus_by_model[model].items() if size >= cards)
                                for model in models], float)
            if weights.sum():
                pod = replace(pod, gpu_spec=models[rng.choice(len(models), p=weights / weights.sum())])
        result.append(pod)
    return result
