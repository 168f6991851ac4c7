class DomainError(Exception):
    """A refusal by a service, meant for the caller: an API 400 or a form error beside `field`."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
