"""The HTTP side of `hf`: one session with the token, and the API's errors (`{"code", "message"}`) as one
exception the command line prints as one line."""

import requests

TIMEOUT_SECONDS = 30


class ApiError(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class Api:
    def __init__(self, server: str, token: str | None = None):
        self.server = server.rstrip("/")
        self.session = requests.Session()
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    def get(self, path: str, **params) -> requests.Response:
        return self._call("GET", path, params={key: value for key, value in params.items() if value is not None})

    def post(self, path: str, body: dict | None = None) -> requests.Response:
        return self._call("POST", path, json=body)

    def _call(self, method: str, path: str, **kwargs) -> requests.Response:
        try:
            response = self.session.request(method, f"{self.server}/api/v1/{path}", timeout=TIMEOUT_SECONDS,
                                            **kwargs)
        except requests.RequestException as error:
            raise ApiError("unreachable", f"cannot reach {self.server}: {error.__class__.__name__}") from None
        if response.ok:
            return response
        try:
            body = response.json()
            code, message = body.get("code", str(response.status_code)), body.get("message", response.reason)
        except (ValueError, AttributeError):
            code, message = str(response.status_code), response.reason or "error"
        raise ApiError(code, message)
