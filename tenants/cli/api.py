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

    def get_all(self, path: str, **params) -> list:
        """Every item of a paged list (design §14: a plain array per page, the next page in the `Link` header)."""
        response = self.get(path, **params)
        items = response.json()
        while "next" in response.links:
            url = response.links["next"]["url"]
            # The token goes only to the server it was given for, whatever a Link header names.
            if not url.startswith(self.server + "/"):
                raise ApiError("bad_link", f"the next page is not on {self.server}: {url}")
            response = self._call("GET", url, absolute=True)
            items += response.json()
        return items

    def post(self, path: str, body: dict | None = None) -> requests.Response:
        return self._call("POST", path, json=body)

    def delete(self, path: str) -> requests.Response:
        return self._call("DELETE", path)

    def patch(self, path: str, body: dict) -> requests.Response:
        return self._call("PATCH", path, json=body)

    def _call(self, method: str, path: str, *, absolute: bool = False, **kwargs) -> requests.Response:
        url = path if absolute else f"{self.server}/api/v1/{path}"
        try:
            response = self.session.request(method, url, timeout=TIMEOUT_SECONDS, **kwargs)
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
