"""Form plumbing shared by the console's submission pages: a form as an API body, its errors beside its fields."""

import re

from rest_framework.exceptions import ValidationError

from heteroflow_site.errors import DomainError
from heteroflow_site.serializers import flat_errors
from scheduling.web.pool_form import POOL_FORM_FIELDS, pool_payload

# The task form's inputs that go to the API body as typed (TaskInput); an empty one is left out so that the API's
# default applies, except those the API must name when they are missing.
TASK_FORM_INPUTS = ("name", "type", "image", "command", "gpu_type", "gpu_required", "gpu_memory_mb",
                    "gpu_compute_percent", "cpu_cores", "memory_mb", "priority", "deadline")
TASK_FORM_ALWAYS_SENT = ("name", "gpu_type")
# A task's or group's timeout and grace (design §17.1): `none` in the timeout input runs it until stopped.
STOP_FORM_FIELDS = ("timeout_seconds", "termination_grace_seconds")
NO_TIMEOUT = "none"
# Every field the task form shows an error beside.
TASK_FORM_FIELDS = frozenset({"tenant", *TASK_FORM_INPUTS, "preemptible", "labels", *POOL_FORM_FIELDS,
                              *STOP_FORM_FIELDS})


def stop_payload(post) -> dict:
    """The timeout and grace inputs as API fields: empty ones left out (the API's defaults), `none` a null."""
    payload = {name: post.get(name, "").strip() for name in STOP_FORM_FIELDS if post.get(name, "").strip()}
    if payload.get("timeout_seconds", "").lower() == NO_TIMEOUT:
        payload["timeout_seconds"] = None
    return payload


def task_form_payload(post, *, admin: bool) -> dict:
    """The task form as an API body: empty inputs are left out so that the API's defaults apply."""
    payload = {}
    for name in TASK_FORM_INPUTS:
        value = post.get(name, "").strip() if name != "command" else post.get(name, "")
        if value != "" or name in TASK_FORM_ALWAYS_SENT:
            payload[name] = value
    payload["preemptible"] = post.get("preemptible") == "on"
    labels = {}
    for key, value in zip(post.getlist("label_key"), post.getlist("label_value")):
        if key.strip() or value.strip():
            labels[key.strip()] = value
    payload["labels"] = labels
    payload.update(pool_payload(post))
    payload.update(stop_payload(post))
    if admin:
        payload["tenant"] = post.get("tenant", "").strip() or None
    return payload


def _error_map(error: Exception) -> dict[str, list[str]]:
    """Errors by form field; what lies below a field (a label's key) is named in the message."""
    if isinstance(error, DomainError):
        return {error.field or "__all__": [error.message]}
    detail = error.detail if isinstance(error.detail, dict) else {"__all__": error.detail}
    errors: dict[str, list[str]] = {}
    for path, texts in flat_errors(detail).items():
        field, below = re.match(r"([^.\[]*)\.?(.*)", path).groups()
        errors.setdefault(field, []).extend(f"{below}: {text}" if below else text for text in texts)
    return errors


def submitted(create):
    """Run a form's submission: (what it created, {}) or, refused, (None, the errors by field)."""
    try:
        return create(), {}
    except (ValidationError, DomainError) as error:
        return None, _error_map(error)


def error_context(errors: dict[str, list[str]], form_fields) -> dict:
    """A refused submission for its form: errors beside the fields the form has, the others above it."""
    return {
        "errors": errors,
        "field_errors": {field: texts for field, texts in errors.items() if field in form_fields},
        "form_errors": [text if field == "__all__" else f"{field}: {text}"
                        for field, texts in errors.items() if field not in form_fields for text in texts],
    }
