"""What `hf` prints of the server's text is text, never terminal commands.

A task's output is whatever its container wrote: escape sequences can move the cursor over earlier lines, retitle
the window, write the clipboard (OSC 52) or draw a link whose target is not its text (OSC 8). `LogFilter` keeps
printable text, tabs and line ends and drops every escape and control sequence, also when one arrives split across
two reads of a followed log. Names and other fields go into tables as plain `rich.text.Text` (never as markup: a
task named `[/]` or `[link=…]` is shown as written).
"""

import re

# ESC-introduced sequences (ECMA-48): CSI `ESC [ … final`, OSC / DCS / SOS / PM / APC strings up to BEL or ST,
# and the two-character ones; then their 8-bit C1 forms. An unterminated one at the end of a chunk is held back.
_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"                       # CSI
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # OSC, DCS, SOS, PM, APC … BEL or ST
    r"|\x1b[ -/]*[0-~]"                              # two-character (and nF) escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"                        # 8-bit CSI
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"  # 8-bit string introducers
)
# An escape sequence begun but not ended by the end of the text seen so far.
_UNFINISHED = re.compile(
    r"(?:\x1b(?:\[[0-?]*[ -/]*|[\]PX^_][^\x07\x1b\x9c]*|[ -/]*)?|\x9b[0-?]*[ -/]*"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*)\Z"
)
# What is left of control characters once sequences are gone: all of C0 but tab and line feed, DEL, and C1.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
# Longer than any sequence a terminal honours: such a "sequence" is dropped rather than held back for ever.
_LONGEST_HELD = 4096


def strip_controls(text: str) -> str:
    """`text` without escape sequences and control characters (`\\r\\n` becomes a line end, a lone `\\r` too: it
    would otherwise let a line overwrite what was printed before it)."""
    text = _SEQUENCE.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", text)


class LogFilter:
    """`strip_controls` over a stream read in chunks: a sequence split between two chunks is removed whole."""

    def __init__(self) -> None:
        self._held = ""

    def feed(self, chunk: str) -> str:
        text = self._held + chunk
        self._held = ""
        unfinished = _UNFINISHED.search(text)
        if unfinished and len(unfinished.group()) < _LONGEST_HELD:
            text, self._held = text[:unfinished.start()], unfinished.group()
        elif text.endswith("\r"):
            # Perhaps the first half of a `\r\n`.
            text, self._held = text[:-1], "\r"
        return strip_controls(text)

    def close(self) -> str:
        """What was held back at the end of the stream (an unfinished sequence is dropped)."""
        held, self._held = self._held, ""
        return strip_controls(_UNFINISHED.sub("", held))
