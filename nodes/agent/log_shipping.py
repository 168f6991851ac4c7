"""The agent's side of task logs (design §16.4): output read from the runtime waits here until the control plane
takes it, in batches of at most BATCH_BYTES (`POST /api/v1/agent/tasks/{id}/logs`).

While the server is unreachable a task's output is held, at most HELD_BYTES of it (the server keeps no more than
1 MiB a task either), the oldest dropped first; held output goes out before anything newer of its task, and
before the status reports held with it, so a task's log is complete by the time its end is known.
"""

from __future__ import annotations

import logging
import threading

from .client import AgentClient, AgentRequestError, ServerUnavailable

logger = logging.getLogger(__name__)

BATCH_BYTES = 64 * 1024
HELD_BYTES = 1024 * 1024


class LogShipper:
    def __init__(self, client: AgentClient) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._held: dict[int, bytearray] = {}

    def add(self, task_id: int, data: bytes) -> None:
        if data:
            with self._lock:
                self._append_locked(task_id, data)

    def flush(self, task_ids: list[int] | None = None) -> None:
        """Send what is held of these tasks (all by default). Raises ServerUnavailable, keeping what was not sent;
        output the server refuses (the task is no longer placed here) is dropped."""
        with self._lock:
            chosen = list(self._held) if task_ids is None else [task_id for task_id in task_ids
                                                                   if task_id in self._held]
            taken = {task_id: self._held.pop(task_id) for task_id in chosen}
        for position, (task_id, data) in enumerate(taken.items()):
            sent = 0
            try:
                while sent < len(data):
                    self.client.send_logs(task_id, bytes(data[sent:sent + BATCH_BYTES]))
                    sent += BATCH_BYTES
            except AgentRequestError as exc:
                logger.error("task %s: log output refused, dropped: %s", task_id, exc)
            except ServerUnavailable:
                unsent = {task_id: data[sent:], **{later: taken[later] for later in list(taken)[position + 1:]}}
                self._hold_again(unsent)
                raise

    def discard(self, task_id: int) -> None:
        with self._lock:
            self._held.pop(task_id, None)

    def _hold_again(self, unsent: dict[int, bytearray]) -> None:
        with self._lock:
            for task_id, data in unsent.items():
                newer = self._held.pop(task_id, bytearray())
                self._held[task_id] = bytearray(data)
                self._append_locked(task_id, newer)

    def _append_locked(self, task_id: int, data: bytes) -> None:
        held = self._held.setdefault(task_id, bytearray())
        held += data
        if len(held) > HELD_BYTES:
            del held[:len(held) - HELD_BYTES]
