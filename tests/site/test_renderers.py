import datetime
import json
import uuid
from decimal import Decimal

import numpy as np
import pytest
from django.utils.translation import gettext_lazy
from rest_framework.exceptions import ErrorDetail
from rest_framework.renderers import JSONRenderer

from heteroflow_site.renderers import ORJSONRenderer

SAMPLE = {
    "at": datetime.datetime(2026, 12, 3, 12, 0, tzinfo=datetime.timezone.utc),
    "day": datetime.date(2026, 12, 3),
    "took": datetime.timedelta(seconds=90),
    "quota": Decimal("2.50"),
    "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "message": gettext_lazy("This field is required."),
    "errors": {"name": [ErrorDetail("too long", code="max_length")]},
    "by_card": {0: 1, 1: 2},
    "scores": np.array([0.5, 1.0]),
    "count": np.int64(3),
    "nodes": [{"node": "a100-01", "reason": None, "scores": {"spread": 0.25}, "total": 12.5}],
    "名称": "北京",
}


def test_the_api_json_says_what_drfs_own_encoder_says():
    assert json.loads(ORJSONRenderer().render(SAMPLE)) == json.loads(JSONRenderer().render(SAMPLE))
    assert b'"2026-12-03T12:00:00Z"' in ORJSONRenderer().render(SAMPLE)


def test_no_data_is_an_empty_body():
    assert ORJSONRenderer().render(None) == b""


@pytest.mark.django_db
def test_api_responses_are_rendered_by_it(tenant_client):
    response = tenant_client.get("/api/v1/tasks")
    assert isinstance(response.accepted_renderer, ORJSONRenderer) and response.json() == []
