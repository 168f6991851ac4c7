import pytest
from django.core.management import CommandError

from nodes.management.commands.run_agent import parse_fake_cards


def test_fake_cards_spec():
    cards = parse_fake_cards("ascend:910B:4:65536")
    assert [(c.index, c.type, c.model, c.memory_total_mb) for c in cards] == [
        (i, "ascend", "910B", 65536) for i in range(4)]


def test_bad_fake_cards_spec_names_the_format():
    with pytest.raises(CommandError, match="TYPE:MODEL:COUNT:MEMORY_MB"):
        parse_fake_cards("ascend:910B")
