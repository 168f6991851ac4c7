class DomainError(Exception):
    """A refusal by a service, meant for the caller: an API 400 or a form error beside `field`."""

    # The API status and error code of the refusal; a few refusals are not "invalid input" (see TooManyPending).
    status = 400
    code = "invalid"

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


class TooManyPending(DomainError):
    """The tenant already has as many pending tasks as `HETEROFLOW_MAX_PENDING_PER_TENANT` allows."""

    status = 429
    code = "too_many_pending"
