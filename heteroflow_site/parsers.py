"""The API's one body parser: JSON nested at most 64 levels deep whose every string PostgreSQL can store.

Deeper nesting is a 400 (design §16.5): no operation takes such a document, and the decoder would otherwise hit
Python's recursion limit (a body of 100,000 `[` was a 500).

PostgreSQL text and jsonb hold neither the NUL character nor a lone UTF-16 surrogate (JSON's `\\ud800` escapes,
which no UTF-8 can encode). DRF's CharField refuses both, but free-form objects (a plugin's `extra`, label maps)
would carry them to the database and fail there with a 500. Refused here, for every operation at once, as a 400
naming the field.
"""

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, ParseError
from rest_framework.parsers import JSONParser

NUL = "\x00"
# The code of the 400 for text PostgreSQL cannot store.
UNSTORABLE_TEXT = "unstorable_text"
MAX_JSON_DEPTH = 64
TOO_DEEP_MESSAGE = f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels"


class StorableJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(TOO_DEEP_MESSAGE) from None
        if nesting_exceeds(data, MAX_JSON_DEPTH):
            raise ParseError(TOO_DEEP_MESSAGE)
        path = unstorable_text_path(data)
        if path is not None:
            raise serializers.ValidationError(
                {path or "body": [ErrorDetail("text may not contain the NUL character or a lone surrogate "
                                              "(\\ud800–\\udfff)", code=UNSTORABLE_TEXT)]})
        return data


def nesting_exceeds(value, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels deep; iterative, so any depth is safe to ask."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth > limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def unstorable_text_path(value, path: str = "") -> str | None:
    """Where in a parsed JSON document a key or string PostgreSQL cannot store sits (`extra.key[2]`), or None."""
    if isinstance(value, str):
        return path if not _storable(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            inner = f"{path}.{key}" if path else key
            if not _storable(key):
                return path or "body"
            found = unstorable_text_path(item, inner)
            if found is not None:
                return found
    elif isinstance(value, list):
        for position, item in enumerate(value):
            found = unstorable_text_path(item, f"{path}[{position}]")
            if found is not None:
                return found
    return None


def _storable(text: str) -> bool:
    if NUL in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
