"""The immediate queue of design §3/§4: task ids pushed at creation, drained by the scheduler between ticks."""

from functools import lru_cache

import redis
from django.conf import settings

QUEUE_KEY = "heteroflow:immediate-queue"
# Set by an operator's "run a cycle now": the next immediate tick runs a cycle even with no new task.
CYCLE_REQUEST_KEY = "heteroflow:cycle-requested"
QUEUE_CAPACITY = 1000

# Length check and push in one step, so that concurrent producers cannot overfill the queue.
_BOUNDED_PUSH = """
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[1])
return 1
"""


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def connection() -> redis.Redis:
    return _client(settings.REDIS_URL)


def push(task_id: int) -> bool:
    """Queue a task id; False when the queue is full (the task then waits for the next cycle)."""
    return bool(connection().eval(_BOUNDED_PUSH, 1, QUEUE_KEY, str(task_id), QUEUE_CAPACITY))


def drain(limit: int = QUEUE_CAPACITY) -> list[int]:
    pipe = connection().pipeline()
    pipe.lrange(QUEUE_KEY, 0, limit - 1)
    pipe.ltrim(QUEUE_KEY, limit, -1)
    pipe.delete(CYCLE_REQUEST_KEY)  # the cycle that drains is the one asked for
    raw, _, _ = pipe.execute()
    return [int(item) for item in raw]


def length() -> int:
    return int(connection().llen(QUEUE_KEY))


def request_cycle() -> None:
    """Ask for a cycle soon (within the immediate tick) without running one here."""
    connection().set(CYCLE_REQUEST_KEY, 1)


def work_waiting() -> bool:
    """Whether a cycle should start before the next tick: new tasks are queued or a cycle was requested."""
    pipe = connection().pipeline()
    pipe.llen(QUEUE_KEY)
    pipe.exists(CYCLE_REQUEST_KEY)
    queued, requested = pipe.execute()
    return bool(queued or requested)
