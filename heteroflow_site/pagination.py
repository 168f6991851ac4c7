"""API lists page by `limit` and `offset` and keep a plain JSON array as their body: the neighbouring pages are in
the `Link` header (RFC 8288, as GitHub's API does) and the total in `X-Total-Count`, so a client that reads the
array keeps working, and a list costs the same however long the history behind it."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response

DEFAULT_LIMIT = 100
MAX_LIMIT = 500
MAX_OFFSET = 2**31 - 1

PAGE_PARAMETERS = [
    OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                     description=f"items per page (default {DEFAULT_LIMIT})"),
    OpenApiParameter("offset", {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
                     description="items skipped before the page (default 0)"),
]
PAGE_HEADERS = [
    OpenApiParameter("Link", OpenApiTypes.STR, location=OpenApiParameter.HEADER, response=True,
                     description='the next and previous pages: `<url>; rel="next", <url>; rel="prev"`'),
    OpenApiParameter("X-Total-Count", OpenApiTypes.INT, location=OpenApiParameter.HEADER, response=True,
                     description="items in all pages"),
]


class PageInput(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=MAX_LIMIT, default=DEFAULT_LIMIT)
    offset = serializers.IntegerField(min_value=0, max_value=MAX_OFFSET, default=0)


class LinkHeaderPagination(LimitOffsetPagination):
    """A bad `limit` or `offset` is a 400 naming it (DRF's own pagination would silently use the default)."""

    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT

    def paginate_queryset(self, queryset, request, view=None):
        page = PageInput(data={key: request.query_params[key] for key in ("limit", "offset")
                               if key in request.query_params})
        page.is_valid(raise_exception=True)
        self.limit, self.offset = page.validated_data["limit"], page.validated_data["offset"]
        self.count = self.get_count(queryset)
        self.request = request
        return list(queryset[self.offset:self.offset + self.limit])

    def get_paginated_response(self, data):
        links = [f'<{url}>; rel="{relation}"' for relation, url in
                 (("next", self.get_next_link()), ("prev", self.get_previous_link())) if url]
        headers = {"X-Total-Count": str(self.count)}
        if links:
            headers["Link"] = ", ".join(links)
        return Response(data, headers=headers)
