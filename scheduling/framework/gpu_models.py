"""Which card models a task's `gpu-model` label asks for (docs/scheduling.md, "Card models").

`gpu-model: A100|H100` lists patterns, case-insensitively. A card's model matches a pattern when the two strings
are equal, or when the pattern's tokens all occur, in order, among the model's tokens (split at spaces, `-`, `_`,
`/`): `A100` and `A100-80GB` match `NVIDIA A100-SXM4-80GB`, `A10` does not. The filter, card choice, the bind
re-check, the forms and the trace replay all ask this module, so a pattern means the same thing everywhere.
Django-free on purpose: the plugins and the replay import it.
"""

import re
from functools import lru_cache

MODEL_LABEL = "gpu-model"
_SEPARATORS = re.compile(r"[\s\-_/]+")


def model_tokens(text: str) -> tuple[str, ...]:
    return tuple(token for token in _SEPARATORS.split(text.strip().lower()) if token)


@lru_cache(maxsize=4096)
def parse_patterns(expression: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The patterns of one label value as (whole lower-cased pattern, its tokens); blanks between `|` dropped."""
    return tuple((pattern.strip().lower(), model_tokens(pattern)) for pattern in expression.split("|")
                 if model_tokens(pattern))


@lru_cache(maxsize=65536)
def model_matches(expression: str, model: str) -> bool:
    """Whether a card of `model` satisfies the label value `expression` (any of its patterns)."""
    whole = model.strip().lower()
    have = model_tokens(model)
    for pattern, wanted in parse_patterns(expression):
        remaining = iter(have)
        if pattern == whole or all(token in remaining for token in wanted):
            return True
    return False


def patterns_error(expression: str) -> str | None:
    """Why a label value can't select any model, for forms and the API; None when it can."""
    if not parse_patterns(expression):
        return "names no card model; list models separated by |, e.g. A100|H100"
    return None
