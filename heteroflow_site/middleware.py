"""The base of the site's middleware: sync under WSGI and in tests, async in the event loop under ASGI, so a request
crosses from the event loop to a thread once, for its view, instead of at every middleware that could only run
synchronously."""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction


class SyncAndAsyncMiddleware:
    """Subclasses give `handle(request)` (the sync path) and `ahandle(request)` (the async path)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.ahandle(request)
        return self.handle(request)

    def handle(self, request):
        raise NotImplementedError

    async def ahandle(self, request):
        raise NotImplementedError
