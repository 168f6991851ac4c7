"""WhiteNoise's middleware, able to run in the event loop under ASGI (WhiteNoise 6 is synchronous only, and one
synchronous middleware makes every request hop between the loop and threads around it). A static file is still
served by WhiteNoise itself, in a thread."""

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    sync_capable = True
    async_capable = True

    def __init__(self, get_response=None, *args, **kwargs):
        super().__init__(get_response, *args, **kwargs)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self._acall(request)
        return super().__call__(request)

    async def _acall(self, request):
        static_file = (await sync_to_async(self.find_file)(request.path_info) if self.autorefresh
                       else self.files.get(request.path_info))
        if static_file is not None:
            return await sync_to_async(self.serve)(static_file, request)
        return await self.get_response(request)
