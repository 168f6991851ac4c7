"""Django's ASGI handler with the middleware and the view run in one thread, as under WSGI.

Django runs an ASGI request's middleware in the event loop and sends each synchronous part to a thread of its own:
every `MiddlewareMixin` middleware (sessions, CSRF, authentication, messages, security, clickjacking) crosses twice,
once for its request hook and once for its response hook, and each `process_view` once more; with the view, some
twenty crossings a request. Each crossing waits for the thread and then for the event loop, and a thread waiting
for the GIL waits up to its switch interval (5 ms) while other requests run: under load the crossings, not the
work, were most of an API request's time (issue 29). Here the whole stack is synchronous and the request crosses
once there and once back; the body is received and the response sent in the event loop as before, so slow clients
still hold no thread.
"""

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler


class OneThreadASGIHandler(ASGIHandler):
    def __init__(self):
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)

    async def get_response_async(self, request):
        # Thread-sensitive within the request's ThreadSensitiveContext: the same thread as the request's other
        # synchronous calls (the request_started receivers, response.close), so the database connection the view
        # used is the one returned to the pool.
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)
