"""`hf`: login, submit, resubmit, ls, describe, logs [-f], stop, events, nodes, quota, usage, group …, template …,
completion (design §16.4, §17.2, §17.4).

Errors are one line, `hf: <code>: <message>` with the API's error code, and a non-zero exit status. Tables are
drawn by rich, which leaves colour out under `NO_COLOR` and when the output is not a terminal; `--json` prints what
the API answered instead. What the server sends is printed as text, never as rich markup or terminal sequences
(`tenants.cli.safe_text`).
"""

import argparse
import getpass
import json
import socket
import sys
import time
from pathlib import Path

from datetime import datetime, timezone

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tenants.cli import config
from tenants.cli.api import Api, ApiError
from tenants.cli.completion import completion_script
from tenants.cli.safe_text import LogFilter, strip_controls

TERMINAL_STATES = {"succeeded", "failed", "stopped"}
FOLLOW_INTERVAL_SECONDS = 1.0
# `hf nodes` reads the node list a page of this many at a time (the API's largest page).
NODES_PAGE = 500
EXIT_ERROR = 1
# The API's longest token name (tenants.models.TOKEN_NAME_MAX_LENGTH): `hf login` names its token after the host.
TOKEN_NAME_MAX = 64
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


def _text(value) -> Text:
    """A cell or line as plain text: rich reads no markup in it (a name `[/]` or `[link=…]` is shown as written)."""
    return Text(strip_controls("" if value is None else str(value)))


def _table(title: str | None, columns: list[str], rows: list[list]) -> None:
    table = Table(title=title, show_edge=False, header_style="bold")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(_text(value) for value in row))
    console.print(table)


def _line(text: str) -> None:
    console.print(_text(text))


def _fields(fields: list[tuple[str, object]]) -> None:
    width = max(len(label) for label, _ in fields) + 1
    for label, value in fields:
        _line(f"{label + ':':<{width}} {value}")


def _warn(message: str) -> None:
    sys.stderr.write(f"hf: {strip_controls(message)}\n")


def _print_warnings(created: dict) -> None:
    for warning in created.get("warnings") or []:
        _warn(f"warning: {warning.get('code')}: {warning.get('message')}")


# --- commands ---------------------------------------------------------------------------------------------------


def _secret(prompt: str, *, from_stdin: bool = False) -> str:
    """Asked without echo at a terminal; else (or when `from_stdin`) the first line of standard input."""
    if from_stdin or not sys.stdin.isatty():
        return sys.stdin.readline().strip()
    return getpass.getpass(prompt)


def login(args) -> None:
    server, assumed = config.with_scheme(args.server or input("Server URL: "))
    if assumed:
        _warn(f"no scheme in the server address: assuming {server}")
    if args.token:
        _warn("--token shows the token to every user in `ps` and stays in your shell history; "
              "prefer --token-stdin or the prompt")
    token = args.token or (_secret("Token: ") if args.token_stdin else None)
    if not token:
        username = args.username or input("Username: ")
        password = _secret("Password: ", from_stdin=args.password_stdin)
        # Named after this machine, so that the API tokens page tells which client a token is.
        body = {"username": username, "password": password, "name": f"hf on {socket.gethostname()}"[:TOKEN_NAME_MAX]}
        token = Api(server).post("auth/token", body).json()["token"]
    Api(server, token).get("tasks", limit=1, diagnostics="summary")  # refused unless the token works
    path = config.save(config.Config(server=server, token=token))
    _line(f"logged in to {server}; token stored in {path}")


def submit(args) -> None:
    api = _api()
    body = _template_fields(api, args.template) if args.template else {}
    given = _submission_body(args, require_name=not body.get("name"))
    if "labels" in given:
        given["labels"] = {**(body.get("labels") or {}), **given["labels"]}
    body.update(given)
    is_group = "world_size" in body
    created = api.post("task-groups" if is_group else "tasks", body).json()
    _report_created(args, created, "group" if is_group else "task")


def _report_created(args, created: dict, kind: str) -> None:
    if args.json:
        _print_json(created)
        return
    _print_warnings(created)
    _line(f"submitted {kind} {created['id']} ({created.get('status', '')})")


def _load_yaml(path: str) -> dict:
    try:
        loaded = yaml.safe_load(Path(path).read_text() if path != "-" else sys.stdin.read())
    except (OSError, yaml.YAMLError) as error:
        raise ApiError("invalid", f"cannot read {path}: {error}") from None
    if not isinstance(loaded, dict):
        raise ApiError("invalid", f"{path} must hold one mapping: the task's or group's fields")
    return loaded


def _labels(pairs: list[str]) -> dict[str, str]:
    labels = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise ApiError("invalid", f"--label {pair}: expected KEY=VALUE")
        labels[key] = value
    return labels


def _submission_body(args, *, require_name: bool = True) -> dict:
    body: dict = _load_yaml(args.file) if args.file else {}
    flags = {"name": args.name, "type": args.type, "image": args.image, "command": args.command,
             "gpu_type": args.gpu_type, "gpu_required": args.gpus, "gpu_memory_mb": args.gpu_memory_mb,
             "cpu_cores": args.cpu, "memory_mb": args.memory_mb, "priority": args.priority,
             "termination_grace_seconds": args.grace}
    body.update({key: value for key, value in flags.items() if value is not None})
    if args.timeout is not None:
        body["timeout_seconds"] = None if args.timeout == "none" else _whole_number(args.timeout, "--timeout")
    if args.preemptible:
        body["preemptible"] = True
    if args.label:
        body["labels"] = {**(body.get("labels") or {}), **_labels(args.label)}
    if require_name and "name" not in body:
        raise ApiError("invalid", "name: a task needs a name (--name or `name:` in the file)")
    return body


def _whole_number(text: str, flag: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ApiError("invalid", f"{flag}: a number of seconds, or none") from None


def _stops(task: dict) -> str:
    """design §17.1: how long it may run, and the grace every stop gives it."""
    timeout = task.get("timeout_seconds")
    runs = f"stopped after {timeout} s" if timeout is not None else "runs until stopped"
    return f"{runs}; {task.get('termination_grace_seconds', 10)} s from SIGTERM to kill"


def ls(args) -> None:
    tasks = _api().get("tasks", status=args.status, node=args.node, limit=args.limit, diagnostics="summary").json()
    if args.json:
        _print_json(tasks)
        return
    _table(None, ["ID", "NAME", "TYPE", "STATUS", "NODE", "GPUS", "PRIO", "CREATED", "WHY"],
           [[task["id"], task["name"], task["type"], task["status"], task["node"] or "-",
             _card_count(task), task["priority"], _when(task["created_at"]), _why(task)]
            for task in tasks])


def _card_count(task: dict) -> str:
    """How many cards, the same way for every task: whole cards as a count, part of one card as `<1`."""
    if task["gpu_required"]:
        return str(task["gpu_required"])
    return "<1" if task.get("gpu_memory_mb") else "0"


def _cards(task: dict) -> str:
    """The count, and once placed which cards (their indexes) or which card's shard."""
    count = _card_count(task)
    if task["gpus"]:
        return f"{count} (cards {','.join(map(str, task['gpus']))})"
    if task.get("shard"):
        return f"{count} ({task['gpu_memory_mb']} MB of card {task['shard'].get('card')})"
    return count


def _why(task: dict) -> str:
    """The one "why" of the task page: the latest attempt while it waits or runs, the reason it ended after."""
    if task["status"] in TERMINAL_STATES:
        return task.get("reason") or ""
    diagnostics = task.get("diagnostics") or {}
    if task["status"] == "pending":
        return (f"{diagnostics['code']}: {diagnostics.get('message') or ''}" if diagnostics.get("code")
                else "not attempted yet")
    return task.get("reason") or diagnostics.get("message") or ""


def _parse_time(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _when(value: str | None) -> str:
    return value[:19].replace("T", " ") if value else "-"


def _duration(start: str | None, end: str | None) -> str:
    started = _parse_time(start)
    if started is None:
        return "-"
    seconds = int(((_parse_time(end) or datetime.now(timezone.utc)) - started).total_seconds())
    hours, rest = divmod(max(seconds, 0), 3600)
    text = f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s"
    return text if end else f"{text} so far"


def describe(args) -> None:
    api = _api()
    task = api.get(f"tasks/{args.id}").json()
    events = api.get(f"tasks/{args.id}/events").json()
    if args.json:
        _print_json({**task, "events": events})
        return
    ended = task["status"] in TERMINAL_STATES
    fields = [("Name", task["name"]), ("Type", task["type"]), ("Status", task["status"]),
              # Where it ran stays known; the cards and port it held do not outlive it.
              ("Node", task["node"] or "-"), ("Cards", _card_count(task) if ended else _cards(task))]
    if not ended:
        fields.append(("Port", task.get("port") or "-"))
    fields += [("Image", task.get("image") or "-"),
               ("Request", f"{task['gpu_required']} GPU {task['gpu_type'] or 'any type'}, "
                           f"{task['gpu_memory_mb']} MB GPU memory, {task['cpu_cores']} CPU, {task['memory_mb']} MB"),
               ("Priority", f"{task['priority']}{' (preemptible)' if task['preemptible'] else ''}"),
               ("Timeout", _stops(task)),
               ("Labels", ", ".join(f"{key}={value}" for key, value in (task.get("labels") or {}).items()) or "-"),
               ("Created", _when(task["created_at"])), ("Started", _when(task.get("started_at"))),
               ("Ended", _when(task.get("finished_at"))),
               ("Duration", _duration(task.get("started_at"), task.get("finished_at"))),
               ("Why", _why(task) or "-")]
    if task["status"] == "pending" and task.get("queue_position") is not None:
        fields.append(("Queue position", f"{task['queue_position']} in the {task['gpu_type'] or 'any-type'} queue"))
    _fields(fields)
    console.print()
    _table("Events", ["AT", "FROM", "TO", "REASON"],
           [[_when(event["at"]), event["from"] or "-", event["to"], event["reason"]] for event in events])


def logs(args) -> None:
    _task_logs(_api(), args.id, follow=args.follow, tail=args.tail, raw=args.raw)


def _task_logs(api: Api, task_id: int, *, follow: bool, tail: int | None, raw: bool) -> None:
    """The task's output; with `follow`, new output until the task ends (waiting for the first while it is
    pending). Escape and control sequences are dropped unless `raw`."""
    text_filter = None if raw else LogFilter()

    def write(text: str) -> None:
        sys.stdout.write(text if text_filter is None else text_filter.feed(text))
        sys.stdout.flush()

    response = api.get(f"tasks/{task_id}/logs", tail=tail)
    write(response.text)
    offset = response.headers.get("X-Log-Offset", "0")
    if not follow:
        if not response.text:
            status = api.get(f"tasks/{task_id}").json()["status"]
            _warn(f"task {task_id} is {status}: no output yet" if status not in TERMINAL_STATES
                  else f"task {task_id} is {status}: it printed nothing")
        return
    while True:
        finished = api.get(f"tasks/{task_id}").json()["status"] in TERMINAL_STATES
        response = api.get(f"tasks/{task_id}/logs", offset=offset)
        write(response.text)
        offset = response.headers.get("X-Log-Offset", offset)
        # The status was read before this last read, so output shipped before the end was known is printed.
        if finished:
            if text_filter is not None:
                sys.stdout.write(text_filter.close())
            return
        time.sleep(FOLLOW_INTERVAL_SECONDS)


def stop(args) -> None:
    task = _api().post(f"tasks/{args.id}/stop").json()
    if args.json:
        _print_json(task)
        return
    _line(f"task {task['id']}: {task['status']}")


def events(args) -> None:
    rows = _api().get(f"tasks/{args.id}/events").json()
    if args.json:
        _print_json(rows)
        return
    _table(None, ["AT", "FROM", "TO", "REASON"],
           [[_when(event["at"]), event["from"] or "-", event["to"], event["reason"]] for event in rows])


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
    _line(f"tenant {body['tenant']}: {body['gpu_used']:g} of {limit} GPUs in use")
    if body.get("types"):
        _table(None, ["GPU TYPE", "USED", "NOMINAL", "BORROWED"],
               [[line["gpu_type"], f"{line['used']:g}", "-" if line["nominal"] is None else f"{line['nominal']:g}",
                 f"{line['borrowed']:g}"] for line in body["types"]])
    _table(None, ["STATUS", "TASKS"], [[status, count] for status, count in body["tasks"].items() if count])


def resubmit(args) -> None:
    created = _api().post(f"tasks/{args.id}/resubmit").json()
    _report_created(args, created, "task")


# --- templates: a named submission to start from (`hf submit --template NAME`) ----------------------------------


def _template_fields(api: Api, name: str) -> dict:
    for template in api.get_all("task-templates"):
        if template["name"] == name:
            return dict(template["fields"])
    raise ApiError("not_found", f"no template named {name!r} (hf template ls)")


def template_save(args) -> None:
    fields = _submission_body(args, require_name=False)
    template = _api().post("task-templates", {"name": args.template_name, "fields": fields}).json()
    if args.json:
        _print_json(template)
        return
    _line(f"saved template {template['name']}")


def template_ls(args) -> None:
    rows = _api().get_all("task-templates")
    if args.json:
        _print_json(rows)
        return
    _table(None, ["ID", "NAME", "FIELDS", "CREATED"],
           [[row["id"], row["name"], ", ".join(f"{key}={value}" for key, value in row["fields"].items()),
             _when(row["created_at"])] for row in rows])


def template_rm(args) -> None:
    api = _api()
    for template in api.get_all("task-templates"):
        if template["name"] == args.template_name:
            api.delete(f"task-templates/{template['id']}")
            _line(f"deleted template {args.template_name}")
            return
    raise ApiError("not_found", f"no template named {args.template_name!r}")


# --- groups (design §10, §17.2) ----------------------------------------------------------------------------------


def group_submit(args) -> None:
    body = _load_yaml(args.file)
    if args.label:
        body["labels"] = {**(body.get("labels") or {}), **_labels(args.label)}
    created = _api().post("task-groups", body).json()
    _report_created(args, created, "group")


def _group_size(group: dict) -> str:
    """Replicas of a service (× the nodes of each when it has several), workers of a gang."""
    if group.get("replicas") is None:
        return str(group["world_size"])
    nodes = group.get("nodes_per_replica") or 1
    return f"{group['replicas']} × {nodes} nodes" if nodes > 1 else str(group["replicas"])


def group_ls(args) -> None:
    groups = _api().get("task-groups", limit=args.limit).json()
    if args.json:
        _print_json(groups)
        return
    _table(None, ["ID", "NAME", "TYPE", "STATUS", "SIZE", "GPUS EACH", "CREATED", "WHY"],
           [[group["id"], group["name"], group["type"], group["status"], _group_size(group),
             group["gpus_per_worker"], _when(group["created_at"]),
             (group.get("diagnostics") or {}).get("message") or ""] for group in groups])


def group_describe(args) -> None:
    group = _api().get(f"task-groups/{args.id}").json()
    if args.json:
        _print_json(group)
        return
    diagnostics = group.get("diagnostics") or {}
    _fields([("Name", group["name"]), ("Type", group["type"]), ("Status", group["status"]),
             ("Size", f"{_group_size(group)} × {group['gpus_per_worker']} GPU {group['gpu_type'] or 'any type'}"),
             ("Labels", ", ".join(f"{key}={value}" for key, value in (group.get("labels") or {}).items()) or "-"),
             ("Master", group.get("master_addr") or "-"), ("Created", _when(group["created_at"])),
             ("Why", f"{diagnostics['code']}: {diagnostics.get('message') or ''}" if diagnostics.get("code")
              else "-")])
    console.print()
    # A multi-node replica's members (design §17.1) with their rank inside it.
    ranked = (group.get("nodes_per_replica") or 1) > 1
    _table("Members", ["REPLICA", *(["RANK"] if ranked else []), "TASK", "STATUS", "NODE", "GPUS"],
           [[_replica(member), *([member["rank"]] if ranked else []), member["task"], member["status"],
             member["node"] or "-", ",".join(map(str, member["gpus"])) or "-"] for member in group["members"]])


def _replica(member: dict) -> int:
    """A service's replica number, a gang's rank."""
    return member["replica"] if member.get("replica") is not None else member["rank"]


def group_stop(args) -> None:
    group = _api().post(f"task-groups/{args.id}/stop").json()
    if args.json:
        _print_json(group)
        return
    # Replicas still running stop with their grace; the group reads `stopped` once the last one has.
    _line(f"group {group['id']}: stopped" if group["status"] == "stopped"
          else f"group {group['id']}: stopping (each replica gets its grace; nothing is rebuilt)")


def group_scale(args) -> None:
    group = _api().patch(f"task-groups/{args.id}", {"replicas": args.replicas}).json()
    if args.json:
        _print_json(group)
        return
    _line(f"group {group['id']}: {group.get('replicas')} replicas desired")


def group_endpoints(args) -> None:
    rows = _api().get(f"task-groups/{args.id}/endpoints").json()
    if args.json:
        _print_json(rows)
        return
    _table(None, ["REPLICA", "TASK", "NODE", "ADDRESS"],
           [[row.get("replica"), row.get("task"), row.get("node"), f"{row.get('address')}:{row.get('port')}"]
            for row in rows])


def group_logs(args) -> None:
    api = _api()
    members = api.get(f"task-groups/{args.id}").json()["members"]
    chosen = [member for member in members if _replica(member) == args.replica]
    if not chosen:
        raise ApiError("not_found", f"group {args.id} has no replica {args.replica} "
                                    f"(it has {', '.join(str(_replica(member)) for member in members) or 'none'})")
    # The newest member of that number: a rebuilt replica or a restarted gang keeps its number. A multi-node
    # replica's output is its master's (rank 0), which serves.
    task_id = max(member["task"] for member in chosen if member.get("replica") is None or member["rank"] == 0)
    _task_logs(api, task_id, follow=args.follow, tail=args.tail, raw=args.raw)


def completion(args) -> None:
    sys.stdout.write(completion_script(args.shell, parser()))

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


def _task_flags(sub: argparse.ArgumentParser) -> None:
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
    sub.add_argument("--timeout", metavar="SECONDS|none",
                     help="stop it after this long (60 s to 30 days), none: run until stopped; left out: the default "
                          "of its type (batch and training 2 hours, inference none)")
    sub.add_argument("--grace", type=int, metavar="SECONDS",
                     help="seconds from the stop signal to the kill, on every stop (0-600, default 10)")
    sub.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")


def _log_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("-f", "--follow", action="store_true",
                     help="keep printing new output until the task ends (waits for a pending task's first output)")
    sub.add_argument("--tail", type=int, help="only the last N lines")
    sub.add_argument("--raw", action="store_true",
                     help="print the output as sent, terminal escape sequences included (only for output you trust)")


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="hf", description="HeteroFlow command-line client")
    commands = root.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, handler, help_text: str, *, listing: bool = False,
                under=commands) -> argparse.ArgumentParser:
        sub = under.add_parser(name, help=help_text, description=help_text)
        if handler is not None:
            sub.set_defaults(handler=handler)
        if listing:
            sub.add_argument("--json", action="store_true", help="print the API's JSON")
        return sub

    sub = command("login", login, "store the server and a token (asks for username and password, or a token)")
    sub.add_argument("--server", help="e.g. http://127.0.0.1:8000 (http:// is assumed without a scheme)")
    sub.add_argument("--username")
    sub.add_argument("--password-stdin", action="store_true",
                     help="read the password from standard input (for scripts: … | hf login --username U "
                          "--password-stdin)")
    sub.add_argument("--token-stdin", action="store_true",
                     help="a token from the API tokens page instead of a password: pasted at the prompt, or read "
                          "from standard input")
    sub.add_argument("--token", help="the token itself (visible in `ps` and your history: prefer --token-stdin)")

    sub = command("submit", submit, "submit a task (flags, or -f FILE.yaml; a body with world_size is a group)",
                  listing=True)
    _task_flags(sub)
    sub.add_argument("--template", help="start from a saved template (hf template ls); flags and -f override it")

    command("resubmit", resubmit, "submit a finished task again, as it was submitted", listing=True) \
        .add_argument("id", type=int)

    sub = command("ls", ls, "list tasks, newest first", listing=True)
    sub.add_argument("--status", help="pending, running, … or active")
    sub.add_argument("--node", help="node name or id")
    sub.add_argument("--limit", type=int, default=50)

    for name, handler, help_text in (("describe", describe, "a task: status, node, cards, why, times, timeline"),
                                     ("stop", stop, "stop a task"), ("events", events, "a task's timeline")):
        command(name, handler, help_text, listing=True).add_argument("id", type=int)

    sub = command("logs", logs, "a task's output (the last 1 MiB is kept)")
    sub.add_argument("id", type=int)
    _log_flags(sub)

    command("nodes", nodes, "the cluster's nodes", listing=True)
    sub = command("quota", quota, "your tenant's GPU quota and usage", listing=True)
    sub.add_argument("--tenant", type=int, help="admins: whose")

    group = command("group", None, "task groups: gangs and services").add_subparsers(
        dest="group_command", required=True, metavar="GROUP_COMMAND")
    sub = command("submit", group_submit, "submit a group from YAML (name, type, world_size, gpus_per_worker, …)",
                  listing=True, under=group)
    sub.add_argument("file", help="YAML with the group's fields; - for standard input")
    sub.add_argument("--label", action="append", default=[], metavar="KEY=VALUE", help="every member's label")
    sub = command("ls", group_ls, "list groups, newest first", listing=True, under=group)
    sub.add_argument("--limit", type=int, default=50)
    for name, handler, help_text in (("describe", group_describe, "a group: status, size, why, members"),
                                     ("stop", group_stop, "stop every replica gracefully; nothing is rebuilt"),
                                     ("endpoints", group_endpoints, "the ready replicas' addresses")):
        command(name, handler, help_text, listing=True, under=group).add_argument("id", type=int)
    sub = command("scale", group_scale, "set a service's desired replicas", listing=True, under=group)
    sub.add_argument("id", type=int)
    sub.add_argument("replicas", type=int)
    sub = command("logs", group_logs, "one replica's (or rank's) output", under=group)
    sub.add_argument("id", type=int)
    sub.add_argument("--replica", type=int, required=True, help="the replica number (a gang's rank)")
    _log_flags(sub)

    template = command("template", None, "saved submissions to start from").add_subparsers(
        dest="template_command", required=True, metavar="TEMPLATE_COMMAND")
    sub = command("save", template_save, "save a submission (flags or -f FILE) under a name", listing=True,
                  under=template)
    sub.add_argument("template_name", metavar="NAME")
    _task_flags(sub)
    command("ls", template_ls, "your tenant's templates", listing=True, under=template)
    command("rm", template_rm, "delete a template", under=template).add_argument("template_name", metavar="NAME")

    sub = command("completion", completion, "print a completion script: eval \"$(hf completion bash)\"")
    sub.add_argument("shell", choices=["bash", "zsh"])
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
        sys.stderr.write(f"hf: {strip_controls(str(error))}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    return 0
