"""The API's one body parser: JSON whose every string PostgreSQL can store.

PostgreSQL text and jsonb hold neither the NUL character nor a lone UTF-16 surrogate (JSON's `\\ud800` escapes,
which no UTF-8 can encode). DRF's CharField refuses both, but free-form objects (a plugin's `extra`, label maps)
would carry them to the database and fail there with a 500. Refused here, for every operation at once, as a 400
naming the field.
"""

from rest_framework import serializers
from rest_framework.parsers import JSONParser

NUL = "\x00"


class StorableJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        path = unstorable_text_path(data)
        if path is not None:
            raise serializers.ValidationError(
                {path or "body": ["text may not contain the NUL character or a lone surrogate (\\ud800–\\udfff)"]})
        return data


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
