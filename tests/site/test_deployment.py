"""The production shape: one image from requirements.txt, and a compose file that the compose tool accepts."""

import shutil
import subprocess
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
        assert environment["REDIS_URL"] == "redis://redis:6379/0"
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
