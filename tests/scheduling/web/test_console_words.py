from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.templatetags.console_words import ago, gb, stage_words


@pytest.mark.parametrize(("seconds", "words"), [
    (0, "0 s ago"), (12, "12 s ago"), (59, "59 s ago"), (60, "1 min ago"), (4 * 60 + 50, "4 min ago"),
    (3600, "1 h ago"), (3 * 3600 + 5 * 60 + 9, "3 h 5 min ago"), (2 * 86400 + 4 * 3600 + 60, "2 d 4 h ago"),
    (86400 + 59, "1 d ago"), (-5, "just now"),
])
def test_relative_times_say_what_an_admin_expects(seconds, words):
    now = timezone.now()
    assert ago(now - timedelta(seconds=seconds), now) == words


def test_no_moment_is_never_and_stages_are_words():
    assert ago(None) == "never"
    assert stage_words("post_filter") == "acts when nothing fits"


@pytest.mark.parametrize(("megabytes", "shown"), [
    (81920, "80"), (20480, "20"), (19968, "19.5"), (512, "0.5"), (0, "0"), (123456, "121"), (None, "—"),
])
def test_memory_is_shown_in_gb_short_enough_for_a_cell(megabytes, shown):
    assert gb(megabytes) == shown
