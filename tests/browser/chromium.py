"""Where the browser tests find Chromium (Debian's package, or HETEROFLOW_CHROMIUM), and what to say without it."""

import os
import shutil

INSTALL_HINT = "Chromium not found: install it with `apt-get install chromium` (or point HETEROFLOW_CHROMIUM at one)"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def chromium_path() -> str | None:
    configured = os.environ.get("HETEROFLOW_CHROMIUM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def required_chromium_path() -> str:
    path = chromium_path()
    if path is None:
        raise RuntimeError(INSTALL_HINT)
    return path


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}
