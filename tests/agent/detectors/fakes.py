"""What the detector tests share: canned vendor CLIs and the real captures kept in ``tests/fixtures/vendor-cli``."""

from pathlib import Path

from nodes.agent.detectors import Card

CAPTURES = Path(__file__).resolve().parents[2] / "fixtures" / "vendor-cli"


def capture(vendor: str, name: str) -> str:
    return (CAPTURES / vendor / name).read_text(encoding="utf-8")


def capture_names(vendor: str) -> set[str]:
    return {path.name for path in (CAPTURES / vendor).glob("*.txt")}


class FakeRunner:
    """Answers vendor CLIs from canned stdout, looked up by the whole command line (``"efsmi -q"``) or else by the
    executable (``"efsmi"``); a command it does not know is "not installed". An exception as the answer is raised."""

    def __init__(self, outputs: dict[str, str | Exception]):
        self.outputs = outputs
        self.calls: list[list[str]] = []

    def __call__(self, argv):
        self.calls.append(list(argv))
        output = self.outputs.get(" ".join(argv), self.outputs.get(argv[0]))
        if output is None:
            raise FileNotFoundError(2, "No such file or directory", argv[0])
        if isinstance(output, Exception):
            raise output
        return output

    def command_lines(self) -> list[str]:
        return [" ".join(call) for call in self.calls]


def readings(cards: list[Card]) -> list[tuple]:
    """What a capture shows of each card: index, model, memory total and used, utilisation, temperature."""
    return [(c.index, c.model, c.memory_total_mb, c.memory_used_mb, c.utilization, c.temperature) for c in cards]
