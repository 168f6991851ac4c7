"""Django's ASGI handler with the middleware and the view run in one thread, as under WSGI, on threads kept from
one request to the next.

Django runs an ASGI request's middleware in the event loop and sends each synchronous part to a thread of its own:
every `MiddlewareMixin` middleware (sessions, CSRF, authentication, messages, security, clickjacking) crosses twice,
once for its request hook and once for its response hook, and each `process_view` once more; with the view, some
twenty crossings a request. Each crossing waits for the thread and then for the event loop, and a thread waiting
for the GIL waits up to its switch interval (5 ms) while other requests run: under load the crossings, not the
work, were most of an API request's time (issue 29). Here the whole stack is synchronous and the request crosses
once there and once back; the body is received and the response sent in the event loop as before, so slow clients
still hold no thread.

Django also gives each request a thread of its own (its ThreadSensitiveContext), started for the request and joined
by yet another thread after it: two thread starts a request, each waiting for the GIL in the event loop. The
request's thread here comes from a pool of one-thread executors and goes back to it afterwards.
"""

from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler

# Threads kept waiting for requests; more requests at once than this start threads of their own, ended afterwards.
IDLE_THREADS_KEPT = 32


class OneThreadASGIHandler(ASGIHandler):
    def __init__(self):
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self._idle: list[ThreadPoolExecutor] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        # A request whose client left while its view ran gives its thread back still busy: the next request there
        # waits for it (one at a time, as asgiref's shared thread runs everything outside a request).
        thread = self._idle.pop() if self._idle else ThreadPoolExecutor(max_workers=1, thread_name_prefix="request")
        try:
            async with ThreadSensitiveContext(executor=thread):
                await self.handle(scope, receive, send)
        finally:
            if len(self._idle) < IDLE_THREADS_KEPT:
                self._idle.append(thread)
            else:
                thread.shutdown(wait=False)

    async def get_response_async(self, request):
        # In the request's thread (its ThreadSensitiveContext), as are its other synchronous calls (the
        # request_started receivers, response.close): the database connection the view used is the one closed.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)

