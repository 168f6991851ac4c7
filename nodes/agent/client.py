"""HTTP client for the agent routes of the control plane.

Every call retries with exponential backoff while the server is unreachable or answers 5xx, because a control
plane restart must not make agents drop heartbeats or task reports. Other error statuses are not retried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import requests

logger = logging.getLogger(__name__)

HEARTBEAT_PATH = "/api/v1/agent/heartbeat"
WORK_PATH = "/api/v1/agent/work"
STATUS_PATH = "/api/v1/agent/tasks/{task_id}/status"
LOGS_PATH = "/api/v1/agent/tasks/{task_id}/logs"


class ServerUnavailable(Exception):
    """The server stayed unreachable (or kept answering 5xx) through every retry."""


class AgentRequestError(Exception):
    """The server rejected a request for a reason retrying cannot fix (bad token, bad payload, ...)."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 10.0

    def delay(self, retry_number: int) -> float:
        return min(self.max_delay, self.base_delay * 2 ** retry_number)


class AgentClient:
    def __init__(self, base_url: str, token: str, session: requests.Session | None = None,
                 retry: RetryPolicy = RetryPolicy(), timeout: float = 10.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.base_url = base_url.rstrip("/")
        self.session = session or requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"
        self.retry = retry
        self.timeout = timeout
        self.sleep = sleep

    def heartbeat(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """The server's answer; its ``kill`` lists tasks whose containers must go. An unreadable answer kills
        nothing."""
        response = self._request("POST", HEARTBEAT_PATH, payload)
        try:
            body = response.json()
        except ValueError:
            return {}
        return body if isinstance(body, dict) else {}

    def fetch_work(self, *, probes: bool = False) -> dict[str, list[dict[str, Any]]]:
        """The work list; with `probes`, also the readiness of the replicas running here (for adopted ones)."""
        try:
            body = self._request("GET", f"{WORK_PATH}?probes=1" if probes else WORK_PATH).json()
        except ValueError as exc:  # a 200 that is not JSON: wrong --server URL, or a proxy's page
            raise AgentRequestError(f"GET {WORK_PATH}: answer is not JSON") from exc
        if not isinstance(body, dict):
            raise AgentRequestError(f"GET {WORK_PATH}: expected an object, got {type(body).__name__}")
        return {"start": list(body.get("start") or []), "stop": list(body.get("stop") or []),
                "probe": list(body.get("probe") or [])}

    def report_status(self, task_id: int, from_status: str, to_status: str, reason: str | None = None) -> bool:
        """Ask for the ``from_status -> to_status`` transition; ``True`` if this agent won the CAS, ``False`` on 409."""
        payload: dict[str, Any] = {"from": from_status, "to": to_status}
        if reason is not None:
            payload["reason"] = reason
        response = self._request("POST", STATUS_PATH.format(task_id=task_id), payload, accept=(409,))
        return response.status_code != 409

    def send_logs(self, task_id: int, data: bytes) -> None:
        """Append a batch of the task's output to its log on the server (design §16.4)."""
        self._request("POST", LOGS_PATH.format(task_id=task_id), body=data)

    def _request(self, method: str, path: str, payload: Mapping[str, Any] | None = None,
                 accept: tuple[int, ...] = (), body: bytes | None = None) -> requests.Response:
        url = self.base_url + path
        raw = {"data": body, "headers": {"Content-Type": "text/plain; charset=utf-8"}} if body is not None else {}
        for retry_number in range(self.retry.attempts):
            if retry_number:
                self.sleep(self.retry.delay(retry_number - 1))
            try:
                response = self.session.request(method, url, json=payload, timeout=self.timeout, **raw)
            except (requests.ConnectionError, requests.Timeout) as exc:
                logger.warning("%s %s: server unreachable (%s)", method, path, exc)
                continue
            if response.status_code >= 500:
                logger.warning("%s %s: server error %s", method, path, response.status_code)
                continue
            if response.ok or response.status_code in accept:
                return response
            raise AgentRequestError(f"{method} {path}: {response.status_code} {response.text[:200]}")
        raise ServerUnavailable(f"{method} {path}: no answer after {self.retry.attempts} attempts")
