"""The API's JSON, encoded by orjson: a task list carries each task's latest attempt (up to 250 node entries a
task, design §14), and the standard library's encoder spent a fifth of such a request on it."""

import orjson
from rest_framework.renderers import JSONRenderer
from rest_framework.utils.encoders import JSONEncoder

# What orjson does not know itself (lazy translations, Decimal, timedelta…), and datetimes (DRF writes UTC as `Z`),
# are turned into JSON as DRF would.
_DRF_DEFAULT = JSONEncoder().default


class ORJSONRenderer(JSONRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        return orjson.dumps(data, default=_DRF_DEFAULT,
                            option=orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME)
