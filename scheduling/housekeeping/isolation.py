"""Fault isolation of the housekeeping loops: one bad row never halts a loop for every tenant."""

import logging
from collections.abc import Callable
from typing import TypeVar

from django.db import InterfaceError, OperationalError, transaction

logger = logging.getLogger(__name__)

T = TypeVar("T")


def isolated(work: Callable[[], T], *, what: str) -> T | None:
    """Run one row's share of a loop in its own transaction (a savepoint inside an outer one).

    An unexpected error rolls back that share only, is logged with its traceback, and yields None so the loop goes on
    with the next row. A lost database connection is not a bad row: it still stops the loop.
    """
    try:
        with transaction.atomic():
            return work()
    except (OperationalError, InterfaceError):
        raise
    except Exception:
        logger.exception("%s failed; the loop goes on with the next one", what)
        return None
