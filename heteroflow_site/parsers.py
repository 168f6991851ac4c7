"""The API's one body parser: JSON nested at most 64 levels deep whose every string PostgreSQL can store, its numbers
read as JSON Schema reads them.

Deeper nesting is a 400 (design §16.5): no operation takes such a document, and the decoder would otherwise hit
Python's recursion limit (a body of 100,000 `[` was a 500).

PostgreSQL text and jsonb hold neither the NUL character nor a lone UTF-16 surrogate (JSON's `\\ud800` escapes,
which no UTF-8 can encode). DRF's CharField refuses both, but free-form objects (a plugin's `extra`, label maps)
would carry them to the database and fail there with a 500. Refused here, for every operation at once, as a 400
naming the field.

A number without a fraction is an integer whichever way it is written (`21.0` is `21`, for JSON Schema as for JSON):
it reaches the serializers as an int, so the API takes every integer its schema allows, and no number with a fraction
where it asks for an integer. Numbers are within ±2^53 (the schema's bounds on free-form JSON); one beyond is a
400 naming the field.
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
        return json_numbers(data)


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


# The numbers JSON keeps exactly everywhere (I-JSON, RFC 7493 §2.2): beyond them a double loses integers, and
# PostgreSQL's jsonb gives an integral double back as an integer no 64-bit renderer writes.
MAX_JSON_NUMBER = 2**53
# The code of the 400 for such a number.
NUMBER_OUT_OF_RANGE = "number_out_of_range"
NUMBER_RANGE_MESSAGE = f"a number beyond ±{MAX_JSON_NUMBER}"


def json_numbers(value, path: str = ""):
    """`value` with every number as the API keeps it: one without a fraction is an int (`21.0` → `21`), one beyond
    ±2^53 (`1e400` included, which Python reads as infinity) a 400 naming where it sits (`gpu_required`,
    `extra.key[2]`). Called once the nesting is bounded."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not abs(value) <= MAX_JSON_NUMBER:
            raise serializers.ValidationError(
                {path or "body": [ErrorDetail(NUMBER_RANGE_MESSAGE, code=NUMBER_OUT_OF_RANGE)]})
        return int(value) if isinstance(value, float) and value.is_integer() else value
    if isinstance(value, dict):
        return {key: json_numbers(item, f"{path}.{key}" if path else key) for key, item in value.items()}
    if isinstance(value, list):
        return [json_numbers(item, f"{path}[{position}]") for position, item in enumerate(value)]
    return value


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
