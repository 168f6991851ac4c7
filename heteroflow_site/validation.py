"""Limits of input (design §15.8): the fields every API serializer and form shares, so the OpenAPI schema (built from
these fields' bounds, lengths and patterns) says exactly what the API accepts.

Beyond a limit the request is a 400 naming the field, and nothing is written.
"""

import math
import re

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

NAME_MAX_LENGTH = 100
COMMAND_MAX_BYTES = 64 * 1024
IMAGE_MAX_LENGTH = 255
LABELS_MAX = 64
LABEL_KEY_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 256
AGENT_LABEL_VALUE_MAX_LENGTH = 4096
GPU_QUOTA_MAX = 1_000_000
REPLICAS_MAX = 1024
WORLD_SIZE_MAX = 4096
# PostgreSQL `integer`, the column of every IntegerField / PositiveIntegerField.
INT_COLUMN_MAX = 2**31 - 1

# What PostgreSQL text can hold: no NUL character (heteroflow_site.parsers refuses it in every body; the schema says
# so on every text field). A lone UTF-16 surrogate, refused too, has no pattern that JavaScript's and Python's regular
# expressions read alike: the 400 says `unstorable_text` (api_errors documents it).
STORABLE_PATTERN = r"^[^\u0000]*$"
# No C0 control characters nor DEL (tabs and newlines included): names, labels and images are single-line text.
PRINTABLE_PATTERN = r"^[^\u0000-\u001f\u007f]*$"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
printable = RegexValidator(PRINTABLE_PATTERN, message="control characters are not allowed")

# An OCI image reference, `[registry[:port]/]path[:tag][@digest]`, as the distribution reference grammar has it.
# Every component starts with a letter or digit, so a reference can never be read as a `docker run` flag.
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]{{1,5}})?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,128}"
IMAGE_PATTERN = (rf"^(?:(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*(?::{_TAG})?(?:@{_DIGEST})?)?$")
oci_image_reference = RegexValidator(
    IMAGE_PATTERN, message="not a valid OCI image reference such as registry.example.com/team/train:1.2"
)


def has_control_characters(text: str) -> bool:
    return bool(_CONTROL.search(text))


def NameField(**kwargs) -> serializers.CharField:
    """A name of a tenant, task, group, node, share group…: ≤ 100 printable characters."""
    kwargs.setdefault("max_length", NAME_MAX_LENGTH)
    return serializers.CharField(validators=[printable], **kwargs)


def ImageField(**kwargs) -> serializers.CharField:
    return serializers.CharField(max_length=IMAGE_MAX_LENGTH, required=False, allow_blank=True, default="",
                                 validators=[oci_image_reference], **kwargs)


class CommandField(serializers.CharField):
    """A container command: ≤ 64 KiB of UTF-8 (the schema's maxLength bounds the characters)."""

    def __init__(self, **kwargs):
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_blank", True)
        kwargs.setdefault("default", "")
        super().__init__(max_length=COMMAND_MAX_BYTES, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if len(value.encode("utf-8", "surrogatepass")) > COMMAND_MAX_BYTES:
            raise serializers.ValidationError(f"at most {COMMAND_MAX_BYTES} bytes")
        return value


def ColumnIntegerField(**kwargs) -> serializers.IntegerField:
    """An integer that fits its PostgreSQL `integer` column (0 … 2³¹−1 unless told otherwise)."""
    kwargs.setdefault("min_value", 0)
    kwargs.setdefault("max_value", INT_COLUMN_MAX)
    return serializers.IntegerField(**kwargs)


def finite_number_text(value: str) -> bool:
    """False for text that reads as a number but is not a finite one (`nan`, `inf`, `1e999`)."""
    try:
        number = float(value)
    except ValueError:
        return True
    return math.isfinite(number)


# A label value: printable, and not a number that is not finite (`nan`, `-Infinity`, as float() reads them; a finite
# number written with an exponent beyond float's range, `1e999`, is refused too but has no pattern).
LABEL_VALUE_PATTERN = (r"^(?!\s*[+-]?(?:[nN][aA][nN]|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)\s*$)"
                       r"[^\u0000-\u001f\u007f]*$")


def _labels_schema(value_max_length: int) -> dict:
    """A label map as LabelsField checks it: `propertyNames` (OpenAPI 3.1) for the keys."""
    return {
        "type": "object",
        "maxProperties": LABELS_MAX,
        "propertyNames": {"type": "string", "minLength": 1, "maxLength": LABEL_KEY_MAX_LENGTH,
                          "pattern": PRINTABLE_PATTERN},
        "additionalProperties": {"type": "string", "maxLength": value_max_length, "pattern": LABEL_VALUE_PATTERN},
    }


@extend_schema_field(_labels_schema(LABEL_VALUE_MAX_LENGTH))
class LabelsField(serializers.DictField):
    """A {string: string} label map: ≤ 64 labels, keys 1–63 and values ≤ 256 printable characters, numbers finite."""

    value_max_length = LABEL_VALUE_MAX_LENGTH

    def __init__(self, **kwargs):
        child = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=self.value_max_length,
                                      validators=[printable])
        super().__init__(child=child, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, dict) and len(data) > LABELS_MAX:
            raise serializers.ValidationError(f"at most {LABELS_MAX} labels")
        value = super().to_internal_value(data)
        errors = {}
        for key, text in value.items():
            if not key or len(key) > LABEL_KEY_MAX_LENGTH:
                errors[key] = [f"label keys are 1–{LABEL_KEY_MAX_LENGTH} characters"]
            elif has_control_characters(key):
                errors[key] = ["control characters are not allowed in label keys"]
            elif len(text) > LABEL_VALUE_MAX_LENGTH and not self.may_be_long(key):
                errors[key] = [f"label values are at most {LABEL_VALUE_MAX_LENGTH} characters"]
            elif not finite_number_text(text):
                errors[key] = ["a numeric label value must be a finite number"]
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def may_be_long(self, key: str) -> bool:
        return False


@extend_schema_field(_labels_schema(AGENT_LABEL_VALUE_MAX_LENGTH))
class HeartbeatLabelsField(LabelsField):
    """The labels of a heartbeat: the agent's own `heteroflow.io/…` values (an NVLink topology of 16 cards runs to
    ~700 characters) may be up to 4 KiB; every other label keeps the common limits."""

    value_max_length = AGENT_LABEL_VALUE_MAX_LENGTH
    AGENT_PREFIX = "heteroflow.io/"

    def may_be_long(self, key: str) -> bool:
        return key.startswith(self.AGENT_PREFIX)


def normalised_gpu_type(text: str) -> str:
    """A GPU type as stored (lower case): `NVIDIA ` from an older client means `nvidia`. Every app's entry for a
    type uses it (`nodes.gpu_type_input` for the API's fields), so stored types compare as they are."""
    return text.strip().lower()


def positive_int_or_none(text: str | None) -> int | None:
    """A query parameter such as `?page=` or `?tenant=`: a plain ASCII number within an `integer` column, or None.

    `str.isdigit()` is true for "²", which `int()` then refuses; this accepts ASCII digits only.
    """
    if text is None or not re.fullmatch(r"[0-9]{1,10}", text):
        return None
    number = int(text)
    return number if number <= INT_COLUMN_MAX else None
