"""The base of the site's own middleware. Middleware runs synchronously, under WSGI as under ASGI, where the whole
stack and the view run in one thread per request (heteroflow_site.asgi_http)."""


class Middleware:
    """Subclasses give `handle(request)`."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.handle(request)

    def handle(self, request):
        raise NotImplementedError
