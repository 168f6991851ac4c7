"""The production shape: one image from requirements.txt, and a compose file that the compose tool accepts."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPOSITORY = Path(__file__).resolve().parents[2]
APP_SERVICES = {"migrate", "web", "worker", "beat", "fleet"}


def _compose_command() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_file_validates_with_the_compose_tool():
    command = _compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed")
    check = subprocess.run([*command, "-f", "docker-compose.yml", "config", "-q"], cwd=REPOSITORY,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stderr


def test_every_process_runs_from_the_one_image_against_the_compose_services():
    services = yaml.safe_load((REPOSITORY / "docker-compose.yml").read_text())["services"]
    assert set(services) == APP_SERVICES | {"postgres", "redis"}
    for name in APP_SERVICES:
        assert services[name]["build"] == "." and services[name]["image"] == "heteroflow:latest", name
        environment = services[name]["environment"]
        assert environment["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in environment["DATABASE_URL"]
        assert environment["REDIS_URL"].startswith("redis://:${REDIS_PASSWORD:?") and \
            environment["REDIS_URL"].endswith("@redis:6379/0")
    assert services["web"]["environment"]["DATABASE_POOL"] == "true"
    assert all("DATABASE_POOL" not in services[name]["environment"] for name in APP_SERVICES - {"web"}), \
        "schedulers and workers hold session advisory locks on their one connection"
    assert "web" in services["fleet"]["depends_on"]
    assert services["web"]["healthcheck"]["test"][-1].count("/healthz") == 1


def test_compose_starts_no_demo_without_its_profile_and_requires_a_secret_key():
    """design §16.5: published logins and fake nodes only under the `demo` profile; no default SECRET_KEY."""
    services = yaml.safe_load((REPOSITORY / "docker-compose.yml").read_text())["services"]
    demo = {name for name, service in services.items() if "demo" in service.get("profiles", ())}
    assert demo == {"fleet"}
    assert not [name for name, service in services.items() if name not in demo
                and "seed_demo" in " ".join(map(str, service.get("command") or ()))]
    assert "seed_demo --force" in " ".join(services["fleet"]["command"])
    assert services["web"]["environment"]["SECRET_KEY"].startswith("${SECRET_KEY:?")


def test_the_image_installs_the_same_pinned_requirements():
    dockerfile = (REPOSITORY / "Dockerfile").read_text()
    assert "COPY requirements.txt ." in dockerfile and "pip install -r requirements.txt" in dockerfile
    assert all("==" in line for line in (REPOSITORY / "requirements.txt").read_text().splitlines() if line.strip())
    assert ".env" in (REPOSITORY / ".dockerignore").read_text().split()


def test_only_the_procfiles_web_process_pools_its_database_connections():
    processes = dict(line.split(":", 1) for line in (REPOSITORY / "Procfile").read_text().splitlines() if line)
    assert "DATABASE_POOL=true" in processes["web"]
    assert all("DATABASE_POOL" not in command for name, command in processes.items() if name != "web")


def test_compose_has_no_default_password_and_redis_asks_for_one():
    """No `${POSTGRES_PASSWORD:-heteroflow}`: PostgreSQL and Redis take their passwords from the environment or
    compose refuses to start, the demo profile included (it runs the same database and Redis)."""
    text = (REPOSITORY / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    assert "POSTGRES_PASSWORD:-" not in text and "REDIS_PASSWORD:-" not in text
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    for name in APP_SERVICES:
        assert ":${POSTGRES_PASSWORD:?" in services[name]["environment"]["DATABASE_URL"], name
    redis = services["redis"]
    password = redis["command"][redis["command"].index("--requirepass") + 1]
    assert password.startswith("${REDIS_PASSWORD:?")
    assert redis["environment"]["REDISCLI_AUTH"] == password, "the health check's redis-cli authenticates"
    assert "ports" not in services["postgres"] and "ports" not in redis


def test_compose_publishes_the_web_port_on_the_hosts_loopback_by_default():
    """A client reaching Daphne directly could write its own X-Forwarded-For; by default only the host (its proxy)
    reaches the published port."""
    services = yaml.safe_load((REPOSITORY / "docker-compose.yml").read_text())["services"]
    [published] = services["web"]["ports"]
    address, _, rest = published.partition(":${HETEROFLOW_PORT")
    assert address == "${HETEROFLOW_BIND:-127.0.0.1}" and rest.endswith(":8000")
    assert all("ports" not in service for name, service in services.items() if name != "web")


def test_the_demo_port_is_one_setting_for_make_run_the_procfile_and_the_urls_it_prints():
    """`make run PORT=8100`: honcho starts the Procfile with that base port (the web process's PORT), the fleet is
    told the web's port apart (honcho gives every process a PORT of its own), and the printed URLs say it."""
    dry_run = subprocess.run(["make", "-n", "serve", "PORT=8100"], cwd=REPOSITORY, capture_output=True, text=True,
                             timeout=30)
    assert dry_run.returncode == 0, dry_run.stderr
    assert "http://127.0.0.1:8100/" in dry_run.stdout and "http://127.0.0.1:8000" not in dry_run.stdout
    assert "HETEROFLOW_WEB_PORT=8100" in dry_run.stdout and "honcho start -f Procfile -p 8100" in dry_run.stdout
    processes = dict(line.split(":", 1) for line in (REPOSITORY / "Procfile").read_text().splitlines() if line)
    assert "-p ${PORT:-8000}" in processes["web"]
    assert "--server http://127.0.0.1:${HETEROFLOW_WEB_PORT:-8000}" in processes["fleet"]


@pytest.mark.parametrize("port,origins", [
    (None, ["http://127.0.0.1:8000", "http://localhost:8000"]),
    ("8100", ["http://127.0.0.1:8100", "http://localhost:8100"]),
])
def test_the_default_csrf_origins_follow_the_port(port, origins):
    environment = {key: value for key, value in os.environ.items() if key not in ("PORT", "CSRF_TRUSTED_ORIGINS")}
    environment.update({"DJANGO_SETTINGS_MODULE": "heteroflow_site.settings", "DEBUG": "true"})
    if port:
        environment["PORT"] = port
    read = subprocess.run([sys.executable, "-c", "import json, django; django.setup(); from django.conf import "
                           "settings; print(json.dumps(settings.CSRF_TRUSTED_ORIGINS))"],
                          cwd=REPOSITORY, env=environment, capture_output=True, text=True, timeout=60)
    assert read.returncode == 0, read.stderr
    assert json.loads(read.stdout.strip().splitlines()[-1]) == origins
