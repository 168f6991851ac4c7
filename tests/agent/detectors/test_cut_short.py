"""Output cut short anywhere (a tool killed mid-write, a full disk) is read as far as it goes and never crashes."""

import pytest

from nodes.agent.detectors.base import PARSE_ERRORS, no_numa
from nodes.agent.detectors.biren import BirenDetector
from nodes.agent.detectors.cambricon import CambriconDetector
from nodes.agent.detectors.enflame import EnflameDetector
from nodes.agent.detectors.kunlun import KunlunDetector

from .fakes import CAPTURES, capture

DETECTORS = {"cambricon": CambriconDetector, "kunlunxin": KunlunDetector, "enflame": EnflameDetector,
             "biren": BirenDetector}
STEP = 23  # characters between cuts: every line of every capture is cut somewhere


@pytest.mark.parametrize(("vendor", "name"), sorted(
    (path.parent.name, path.name) for path in CAPTURES.glob("*/*.txt")))
def test_a_capture_cut_anywhere_gives_some_of_its_cards_or_none(vendor, name):
    detector = DETECTORS[vendor](no_numa)
    text = capture(vendor, name)
    whole = {card.index: card for card in detector.parse(text)}
    for cut in range(0, len(text), STEP):
        try:
            cards = detector.parse(text[:cut])
        except PARSE_ERRORS:
            continue
        assert {card.index for card in cards} <= set(whole)
        for card in cards:
            # Cut before its PCI address, a card is known by its index alone.
            assert card.uuid in (whole[card.index].uuid, f"{card.type}-{card.index}")
            assert card.model in (whole[card.index].model, None) or whole[card.index].model.startswith(card.model)
