import logging
import os
import socket
import time

from django.core.management.base import BaseCommand
from django.db import close_old_connections

from scheduling.queue import immediate_queue
from scheduling.cycle.collector import freeze_startup
from scheduling.cycle.run import run_cycle

logger = logging.getLogger(__name__)

DEFAULT_INTERVAL = 5.0
# While waiting for the next tick, look this often for newly submitted tasks, which start a cycle at once.
QUEUE_POLL_SECONDS = 0.5


class Command(BaseCommand):
    help = "Run scheduling cycles every --interval seconds (design §4), or one with --once."

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="seconds between cycle starts")
        parser.add_argument("--once", action="store_true", help="run a single cycle and exit")
        parser.add_argument("--instance", default=f"{socket.gethostname()}:{os.getpid()}",
                            help="name of this scheduler instance in the logs")

    def handle(self, *args, interval: float, once: bool, instance: str, **options):
        if once:
            self._report(run_cycle(instance=instance))
            return
        freeze_startup()
        while True:
            started = time.monotonic()
            close_old_connections()
            try:
                result = run_cycle(instance=instance, attempts_behind=True)
            except Exception:  # a database hiccup costs one cycle, not the scheduler
                logger.exception("scheduling cycle failed")
            else:
                if options["verbosity"] > 1:
                    self._report(result)
            _wait_for_tick_or_new_tasks(started + interval)

    def _report(self, result) -> None:
        self.stdout.write(" ".join(f"{key}={value}" for key, value in result.as_dict().items()))


def _wait_for_tick_or_new_tasks(deadline: float) -> None:
    while (remaining := deadline - time.monotonic()) > 0:
        try:
            if immediate_queue.work_waiting():
                return
        except Exception:  # without Redis the loop simply keeps its tick
            logger.warning("immediate queue unavailable", exc_info=True)
        time.sleep(min(QUEUE_POLL_SECONDS, remaining))
