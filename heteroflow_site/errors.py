class DomainError(Exception):
    """A refusal by a service, meant for the caller: an API error beside `field` (a form error on pages). As such a
    400: input the schema does not allow either; the refusals of input it allows are the subclasses below."""

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


# Refusals of well-formed input: the request is what the schema describes, but the cluster's state or the rules
# refuse it. They are not 400s, which say "the schema did not allow this" (a client built on the schema can tell
# which of its requests it should never have sent); each view lists the ones it returns in its schema (api_errors).


class Conflict(DomainError):
    """The request clashes with what exists now: a name already taken, a channel without an address to test."""

    status = 409
    code = "conflict"


class NotFoundReference(DomainError):
    """The body names something that does not exist (a tenant id in a share group)."""

    status = 404
    code = "not_found"


class NotAllowed(DomainError):
    """A rule forbids the change whatever the caller's rights (a plugin that is always on cannot be disabled)."""

    status = 403
    code = "not_allowed"
