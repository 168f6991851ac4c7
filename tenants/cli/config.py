"""Where `hf` finds its server and token: `HF_SERVER` / `HF_TOKEN` first, else the file `hf login` wrote
(`$HF_CONFIG`, default `~/.config/hf/config.json`, readable by its owner only: it holds a credential)."""

import json
import os
from dataclasses import dataclass
from pathlib import Path


class ConfigError(Exception):
    pass


@dataclass(frozen=True)
class Config:
    server: str
    token: str


def with_scheme(server: str) -> tuple[str, bool]:
    """The server address with `http://` put in front when it has no scheme (`127.0.0.1:8100`), and whether it
    was."""
    server = server.strip().rstrip("/")
    if "://" in server:
        return server, False
    return f"http://{server}", True


def config_path() -> Path:
    return Path(os.environ.get("HF_CONFIG") or Path.home() / ".config" / "hf" / "config.json")


def load() -> Config:
    stored: dict = {}
    path = config_path()
    if path.exists():
        try:
            stored = json.loads(path.read_text())
        except ValueError as error:
            raise ConfigError(f"{path} is not JSON ({error}); run hf login again") from None
    server = os.environ.get("HF_SERVER") or stored.get("server")
    token = os.environ.get("HF_TOKEN") or stored.get("token")
    if not server or not token:
        raise ConfigError("not logged in: run `hf login --server URL` (or set HF_SERVER and HF_TOKEN)")
    return Config(server=with_scheme(server)[0], token=token)


def save(config: Config) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Created with 0600 before the token is written, so it is never readable by others, even for a moment.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        os.fchmod(file.fileno(), 0o600)
        json.dump({"server": config.server, "token": config.token}, file)
    return path
