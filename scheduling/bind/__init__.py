"""Bind (design §5): the one pipeline that turns the framework's placements into database state.

`pipeline` runs it (`bind_placements`, the one door for single tasks and gangs: the Bind plugins, then a batch of
placements, optionally all or nothing), `live` locks and reads what the database
holds now, `recheck` judges each placement against it and `claim` writes the accepted ones in one statement.
"""

from scheduling.bind.pipeline import BindOutcome, Placement, bind_batch, bind_placements, plugin_bind_outcome
from scheduling.bind.recheck import BindRefused, card_under_thresholds

__all__ = ["BindOutcome", "BindRefused", "Placement", "bind_batch", "bind_placements", "card_under_thresholds",
           "plugin_bind_outcome"]
