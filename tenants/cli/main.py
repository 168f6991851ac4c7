"""`hf`: login, submit, ls, describe, logs [-f], stop, events, nodes, quota (design §16.4), usage (§17.4).

Errors are one line, `hf: <code>: <message>` with the API's error code, and a non-zero exit status. Tables are
drawn by rich, which leaves colour out under `NO_COLOR` and when the output is not a terminal; `--json` prints what
the API answered instead.
"""

import argparse
import getpass
import json
import sys
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from tenants.cli import config
from tenants.cli.api import Api, ApiError

TERMINAL_STATES = {"succeeded", "failed", "stopped"}
FOLLOW_INTERVAL_SECONDS = 1.0
# `hf nodes` reads the node list a page of this many at a time (the API's largest page).
NODES_PAGE = 500
EXIT_ERROR = 1
# Piped output is read by programs and pagers: a table is not wrapped at 80 columns there.
PIPED_WIDTH = 250


class _Output:
    """rich's console on the current standard output (it leaves out colour under NO_COLOR and off a terminal)."""

    def print(self, *objects, **options) -> None:
        width = None if sys.stdout.isatty() else PIPED_WIDTH
        Console(highlight=False, width=width).print(*objects, **options)


console = _Output()


def _api() -> Api:
    settings = config.load()
    return Api(settings.server, settings.token)


def _print_json(data) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _table(title: str | None, columns: list[str], rows: list[list]) -> None:
    table = Table(title=title, show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if value is None else str(value) for value in row))
    console.print(table)


# --- commands ---------------------------------------------------------------------------------------------------


def login(args) -> None:
    server = (args.server or input("Server URL: ")).rstrip("/")
    token = args.token
    if not token:
        username = args.username or input("Username: ")
        password = sys.stdin.readline().rstrip("\n") if args.password_stdin else getpass.getpass("Password: ")
        token = Api(server).post("auth/token", {"username": username, "password": password}).json()["token"]
    Api(server, token).get("tasks", limit=1, diagnostics="summary")  # refused unless the token works
    path = config.save(config.Config(server=server, token=token))
    console.print(f"logged in to {server}; token stored in {path}")


def submit(args) -> None:
    body = _submission_body(args)
    is_group = "world_size" in body
    created = _api().post("task-groups" if is_group else "tasks", body).json()
    if args.json:
        _print_json(created)
        return
    console.print(f"submitted {'group' if is_group else 'task'} {created['id']} ({created.get('status', '')})")


def _submission_body(args) -> dict:
    body: dict = {}
    if args.file:
        try:
            loaded = yaml.safe_load(Path(args.file).read_text() if args.file != "-" else sys.stdin.read())
        except (OSError, yaml.YAMLError) as error:
            raise ApiError("invalid", f"cannot read {args.file}: {error}") from None
        if not isinstance(loaded, dict):
            raise ApiError("invalid", f"{args.file} must hold one mapping: the task's or group's fields")
        body.update(loaded)
    flags = {"name": args.name, "type": args.type, "image": args.image, "command": args.command,
             "gpu_type": args.gpu_type, "gpu_required": args.gpus, "gpu_memory_mb": args.gpu_memory_mb,
             "cpu_cores": args.cpu, "memory_mb": args.memory_mb, "priority": args.priority}
    body.update({key: value for key, value in flags.items() if value is not None})
    if args.preemptible:
        body["preemptible"] = True
    for label in args.label:
        key, _, value = label.partition("=")
        body.setdefault("labels", {})[key] = value
    if "name" not in body:
        raise ApiError("invalid", "name: a task needs a name (--name or `name:` in the file)")
    return body


def ls(args) -> None:
    tasks = _api().get("tasks", status=args.status, node=args.node, limit=args.limit, diagnostics="summary").json()
    if args.json:
        _print_json(tasks)
        return
    _table(None, ["ID", "NAME", "TYPE", "STATUS", "NODE", "GPUS", "PRIO", "CREATED", "WHY"],
           [[task["id"], task["name"], task["type"], task["status"], task["node"] or "-",
             _cards(task), task["priority"], task["created_at"][:19].replace("T", " "), _why(task)]
            for task in tasks])


def _cards(task: dict) -> str:
    if task["gpus"]:
        return ",".join(map(str, task["gpus"]))
    if task.get("shard"):
        return f"shard of {task['shard'].get('card')}"
    return f"{task['gpu_required']}" if task["gpu_required"] else "-"


def _why(task: dict) -> str:
    if task["status"] != "pending":
        return task.get("reason") or ""
    return (task.get("diagnostics") or {}).get("message") or "not attempted yet"


def describe(args) -> None:
    api = _api()
    task = api.get(f"tasks/{args.id}").json()
    events = api.get(f"tasks/{args.id}/events").json()
    if args.json:
        _print_json({**task, "events": events})
        return
    diagnostics = task.get("diagnostics") or {}
    fields = [("Name", task["name"]), ("Type", task["type"]), ("Status", task["status"]),
              ("Reason", task.get("reason") or "-"), ("Node", task["node"] or "-"), ("Cards", _cards(task)),
              ("Port", task.get("port") or "-"), ("Image", task.get("image") or "-"),
              ("Request", f"{task['gpu_required']} GPU {task['gpu_type'] or 'any type'}, "
                          f"{task['gpu_memory_mb']} MB GPU memory, {task['cpu_cores']} CPU, {task['memory_mb']} MB"),
              ("Priority", f"{task['priority']}{' (preemptible)' if task['preemptible'] else ''}"),
              ("Created", task["created_at"])]
    if task.get("queue_position") is not None:
        fields.append(("Queue position", f"{task['queue_position']} in the {task['gpu_type'] or 'any-type'} queue"))
    if task["status"] == "pending" or diagnostics.get("code"):
        fields.append(("Why", f"{diagnostics.get('code') or '-'}: {diagnostics.get('message') or 'not attempted yet'}"))
    width = max(len(label) for label, _ in fields) + 1
    for label, value in fields:
        console.print(f"{label + ':':<{width}} {value}", markup=False)
    console.print()
    _table("Events", ["AT", "FROM", "TO", "REASON"],
           [[event["at"][:19].replace("T", " "), event["from"] or "-", event["to"], event["reason"]]
            for event in events])


def logs(args) -> None:
    api = _api()
    response = api.get(f"tasks/{args.id}/logs", tail=args.tail)
    sys.stdout.write(response.text)
    sys.stdout.flush()
    offset = response.headers.get("X-Log-Offset", "0")
    while args.follow:
        finished = api.get(f"tasks/{args.id}").json()["status"] in TERMINAL_STATES
        response = api.get(f"tasks/{args.id}/logs", offset=offset)
        sys.stdout.write(response.text)
        sys.stdout.flush()
        offset = response.headers.get("X-Log-Offset", offset)
        # The status was read before this last read, so output shipped before the end was known is printed.
        if finished:
            return
        time.sleep(FOLLOW_INTERVAL_SECONDS)


def stop(args) -> None:
    task = _api().post(f"tasks/{args.id}/stop").json()
    if args.json:
        _print_json(task)
        return
    console.print(f"task {task['id']}: {task['status']}")


def events(args) -> None:
    rows = _api().get(f"tasks/{args.id}/events").json()
    if args.json:
        _print_json(rows)
        return
    _table(None, ["AT", "FROM", "TO", "REASON"],
           [[event["at"][:19].replace("T", " "), event["from"] or "-", event["to"], event["reason"]] for event in rows])


def nodes(args) -> None:
    rows = _api().get_all("nodes", limit=NODES_PAGE)
    if args.json:
        _print_json(rows)
        return
    _table(None, ["ID", "NAME", "STATUS", "GPU TYPE", "GPUS USED"],
           [[node.get("id"), node.get("name"), node.get("status"), node.get("gpu_type") or "-",
             f"{node.get('gpu_used', 0)}/{node.get('gpu_total', 0)}"] for node in rows])


def quota(args) -> None:
    body = _api().get("quota", tenant=args.tenant).json()
    if args.json:
        _print_json(body)
        return
    limit = "unlimited" if body["gpu_quota"] is None else body["gpu_quota"]
    console.print(f"tenant {body['tenant']}: {body['gpu_used']:g} of {limit} GPUs in use", markup=False)
    _table(None, ["STATUS", "TASKS"], [[status, count] for status, count in body["tasks"].items() if count])


def usage(args) -> None:
    rows = _api().get("usage", **{"from": args.from_day, "to": args.to_day, "group_by": args.by}).json()
    if args.json:
        _print_json(rows)
        return
    keys = [key for key in (rows[0] if rows else {}) if key not in ("card_seconds", "card_hours")]
    _table(None, [*(key.upper().replace("_", " ") for key in keys), "CARD-HOURS"],
           [[*(row[key] for key in keys), f"{row['card_hours']:.2f}"] for row in rows])
    total = sum(row["card_hours"] for row in rows)
    console.print(f"{total:.2f} card-hours in all", markup=False)


# --- the command line -------------------------------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="hf", description="HeteroFlow command-line client")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler, help_text: str, *, listing: bool = False) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        if listing:
            sub.add_argument("--json", action="store_true", help="print the API's JSON")
        return sub

    sub = command("login", login, "store the server and a token (asks for username and password unless --token)")
    sub.add_argument("--server", help="e.g. http://127.0.0.1:8000")
    sub.add_argument("--token", help="a token from the API tokens page, instead of a password")
    sub.add_argument("--username")
    sub.add_argument("--password-stdin", action="store_true", help="read the password from standard input")

    sub = command("submit", submit, "submit a task (flags, or -f FILE.yaml; a body with world_size is a group)",
                  listing=True)
    sub.add_argument("-f", "--file", help="YAML with the task's (or group's) fields; - for standard input")
    sub.add_argument("--name")
    sub.add_argument("--type", choices=["batch", "training", "inference"])
    sub.add_argument("--image")
    sub.add_argument("--command")
    sub.add_argument("--gpu-type")
    sub.add_argument("--gpus", type=int, help="whole cards")
    sub.add_argument("--gpu-memory-mb", type=int, help="a fraction of a card: its memory")
    sub.add_argument("--cpu", type=float)
    sub.add_argument("--memory-mb", type=int)
    sub.add_argument("--priority", type=int)
    sub.add_argument("--preemptible", action="store_true")
    sub.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")

    sub = command("ls", ls, "list tasks, newest first", listing=True)
    sub.add_argument("--status", help="pending, running, … or active")
    sub.add_argument("--node", help="node name or id")
    sub.add_argument("--limit", type=int, default=50)

    for name, handler, help_text in (("describe", describe, "a task: status, node, cards, why pending, timeline"),
                                     ("stop", stop, "stop a task"), ("events", events, "a task's timeline")):
        command(name, handler, help_text, listing=True).add_argument("id", type=int)

    sub = command("logs", logs, "a task's output (the last 1 MiB is kept)")
    sub.add_argument("id", type=int)
    sub.add_argument("-f", "--follow", action="store_true", help="keep printing new output until the task ends")
    sub.add_argument("--tail", type=int, help="only the last N lines")

    command("nodes", nodes, "the cluster's nodes", listing=True)
    sub = command("quota", quota, "your tenant's GPU quota and usage", listing=True)
    sub.add_argument("--tenant", type=int, help="admins: whose")
    sub = command("usage", usage, "card-hours used per day, GPU type, task type (yours; an admin's: every tenant's)",
                  listing=True)
    sub.add_argument("--from", dest="from_day", metavar="YYYY-MM-DD", help="first UTC day (default: 29 days ago)")
    sub.add_argument("--to", dest="to_day", metavar="YYYY-MM-DD", help="last UTC day (default: today)")
    sub.add_argument("--by", default="tenant,gpu_type,day",
                     help="comma-separated, any of tenant, gpu_type, task_type, day (default: %(default)s)")
    return root


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        args.handler(args)
    except (ApiError, config.ConfigError) as error:
        sys.stderr.write(f"hf: {error}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    return 0
