import gc
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heteroflow_site.settings")
django.setup(set_prefix=False)

from heteroflow_site.asgi_http import OneThreadASGIHandler  # noqa: E402  (needs the app registry loaded above)

django_asgi_app = OneThreadASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry loaded above)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from django.conf import settings  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from heteroflow_site.body_limit import BodyLimitMiddleware  # noqa: E402
from heteroflow_site.keep_alive import KeepAliveLimitMiddleware  # noqa: E402
from heteroflow_site.websocket_urls import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Bodies over the limit are refused before Django reads (and spools) them (design §16.5); now and then a
        # client is asked to reconnect, so that the web processes on one port share the load.
        "http": KeepAliveLimitMiddleware(
            BodyLimitMiddleware(django_asgi_app, max_body_bytes=settings.HETEROFLOW_MAX_BODY_BYTES),
            requests_per_connection=settings.HETEROFLOW_REQUESTS_PER_CONNECTION),
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)

# Import every view now rather than on the first request, then leave what startup made to the cyclic garbage
# collector's permanent generation: a request that builds many objects (a task list is some 25,000 dicts) no
# longer makes the collector scan the whole of Django, DRF and the project each time (a list's p50 halved).
get_resolver().url_patterns
gc.collect()
gc.freeze()
# A request's objects die with it, by reference count, well within YOUNG_COLLECTION_ALLOCATIONS: at Python's 700 the
# collector ran in the middle of most requests and moved their live objects to older generations, some 250 young
# and 25 full collections in 20 s of load (1.1 s, 5 % of the process); now 2 to 5 (docs/scheduler-performance.md).
YOUNG_COLLECTION_ALLOCATIONS = 20_000
gc.set_threshold(YOUNG_COLLECTION_ALLOCATIONS, 20, 20)
