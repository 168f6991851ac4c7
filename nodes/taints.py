"""Node pools (design §16.3, seed 004): a node's taints, a task's tolerations and node selector, as kube-scheduler
has them. Plain Python over plain dicts, so the scheduler's filter, the forms and the API share one rule.

A taint `{key, value, effect}` keeps off every task that does not tolerate it: `NoSchedule` refuses the node,
`PreferNoSchedule` only lowers its score. A toleration `{key, operator: Equal|Exists, value?, effect?}` tolerates a
taint with its key (an `Exists` without key: every taint) and, for `Equal`, its value; without `effect` any effect.
A node selector `{label: value}` keeps the nodes whose labels hold every pair.
"""

from collections.abc import Iterable, Mapping

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
EFFECTS = (NO_SCHEDULE, PREFER_NO_SCHEDULE)
EQUAL = "Equal"
EXISTS = "Exists"
OPERATORS = (EQUAL, EXISTS)


def tolerates(toleration: Mapping[str, str], taint: Mapping[str, str]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if toleration.get("operator", EQUAL) == EXISTS:
        return not key or key == taint.get("key")
    return key == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(taints: Iterable[Mapping[str, str]], tolerations: Iterable[Mapping[str, str]],
                effect: str) -> int:
    """How many of the node's `effect` taints none of the task's tolerations tolerates."""
    tolerations = tuple(tolerations)
    return sum(1 for taint in taints
               if taint.get("effect") == effect and not any(tolerates(item, taint) for item in tolerations))


def selector_matches(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(key in labels and str(labels[key]) == str(value) for key, value in selector.items())


def frozen(items: Iterable[Mapping[str, str]]) -> tuple:
    """Taints or tolerations as a hashable value (an equivalence key, a node's static signature)."""
    return tuple(tuple(sorted(item.items())) for item in items)
