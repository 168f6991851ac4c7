from rest_framework.views import exception_handler as drf_exception_handler

from heteroflow_site.errors import DomainError


def exception_handler(exc, context):
    """Domain errors raised by services become 400s with their message (and field, when they name one)."""
    if isinstance(exc, DomainError):
        from rest_framework.exceptions import ValidationError

        exc = ValidationError({exc.field: [exc.message]} if exc.field else {"detail": exc.message})
    return drf_exception_handler(exc, context)
