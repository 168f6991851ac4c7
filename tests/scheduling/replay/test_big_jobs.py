"""Reservation and defragmentation in the dynamic replay (design §16.3, `replay_trace --dynamic --reserve-after S
[--defrag]`) on hand-made traces whose outcome is known."""

import pytest

from scheduling.replay.big_jobs import DefragSettings
from scheduling.replay.dynamic import DynamicReplay, jobs_of, multi_card_mix
from scheduling.replay.trace import TraceNode, TracePod


def pod(name: str, created: int, deleted: int, *, cards: int = 1) -> TracePod:
    return TracePod(name, 1000, 1024, cards, 1000 * bool(cards), "", created, deleted)


def two_cards(name: str) -> TraceNode:
    return TraceNode(name, 64_000, 262_144, 2, "V100M16")


def run(nodes, pods, **big_jobs):
    return DynamicReplay(nodes, jobs_of(pods), policy="binpack", seed=0, **big_jobs).run()


# One 2-card node, two 1-card holders leaving at 100 and 150, a 2-card job arriving at 1, and a stream of 1-card
# tasks (one every 40 s from 120 to 400, 60 s each) that always takes the card that frees first.
STREAM = [pod("h0", 0, 100), pod("h1", 0, 150), pod("big", 1, 51, cards=2),
          *(pod(f"s{start}", start, start + 60) for start in range(120, 401, 40))]


def test_without_reservation_the_stream_keeps_the_big_job_waiting():
    result = run([two_cards("n")], STREAM)
    assert result.classes["2 cards"]["wait_p50"] > 400
    assert result.reservations == 0


def test_a_reserved_node_keeps_freed_cards_for_the_big_job():
    result = run([two_cards("n")], STREAM, reserve_after=10)
    # Reserved at 100 (the first moment after 10 s of waiting); h1 leaves at 150 and the job gets both cards.
    assert result.classes["2 cards"]["wait_p50"] == pytest.approx(149)
    assert (result.reservations, result.moves) == (1, 0)
    assert result.classes["1 card"]["never_placed"] == 0 and result.classes["2 cards"]["never_placed"] == 0


# Two 2-card nodes: binpack puts a and x on n1, b on n2; once x left at 50, one card is free on each. A 2-card job
# arrives at 60; a CPU-only task at 160 makes a moment after it has waited 10 s.
SCATTERED = [pod("a", 0, 1000), pod("x", 0, 50), pod("b", 0, 1000), pod("big", 60, 110, cards=2),
             pod("tick", 160, 161, cards=0)]


def test_defrag_moves_one_task_and_the_job_binds_at_once():
    pods = SCATTERED
    waiting = run([two_cards("n1"), two_cards("n2")], pods, reserve_after=10)
    assert waiting.classes["2 cards"]["wait_p50"] == pytest.approx(940)

    moved = run([two_cards("n1"), two_cards("n2")], pods, reserve_after=10, defrag=DefragSettings())
    assert moved.classes["2 cards"]["wait_p50"] == pytest.approx(100)
    assert moved.moves == 1 and moved.classes["1 card"]["placed"] == 3


def test_the_budget_of_moves_holds_in_the_replay():
    result = run([two_cards("n1"), two_cards("n2")], SCATTERED, reserve_after=10,
                 defrag=DefragSettings(moves_per_hour=0))
    assert result.moves == 0 and result.classes["2 cards"]["wait_p50"] == pytest.approx(940)


def test_the_multi_card_mix_turns_a_share_of_one_card_pods_into_bigger_ones():
    pods = [pod(f"p{index}", index, index + 10) for index in range(1000)]
    mixed = multi_card_mix(pods, 0.3)
    sizes = [item.num_gpu for item in mixed]
    assert 250 < sum(size > 1 for size in sizes) < 350 and set(sizes) == {1, 2, 4, 8}
    assert [item.creation_time for item in mixed] == [item.creation_time for item in pods]
