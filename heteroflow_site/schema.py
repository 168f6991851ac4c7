from drf_spectacular.openapi import AutoSchema


class NestedSerializerAutoSchema(AutoSchema):
    """Names nested `SomeApi.InputSerializer` classes after their API, so that components never collide."""

    def _get_serializer_name(self, serializer, direction, bypass_extensions=False):
        name = super()._get_serializer_name(serializer, direction, bypass_extensions)
        qualname = type(serializer).__qualname__
        if "." in qualname and not getattr(getattr(serializer, "Meta", None), "ref_name", None):
            outer = qualname.split(".")[-2]
            return f"{outer}{name}"
        return name
