"""The `/plugins/` admin page: one view serves the page and, for htmx requests, the fragments it swaps; the latest
replay report (`manage.py replay_trace --report`) has a page and its chart of its own."""

import json
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect
from django.views.decorators.http import require_http_methods

from heteroflow_site.errors import DomainError
from heteroflow_site.validation import positive_int_or_none
from heteroflow_site.web import render_page, staff_required
from plugins_admin.models import NotificationChannel, PluginChange
from plugins_admin.notifications.delivery import CHANNEL_EVENTS
from plugins_admin.notifications.selectors import notification_channels
from plugins_admin.notifications.services import (
    NOTIFICATION_AUDIT_PREFIX,
    notification_channel_test,
    notification_channel_update,
)
from plugins_admin.selectors import ALWAYS_ON_REASON, plugin_history, plugin_listing, scheduler_plugins
from plugins_admin.services import UnknownPlugin, plugin_changes_apply, plugin_set_enabled, plugin_update
from plugins_admin.rules import PluginChangeRequest, plugin_spec
from plugins_admin.settings_form import AS_JSON, FIELD_PREFIX, SettingsFormError, setting_fields, submitted_settings
from plugins_admin.what_if import plugin_change_preview
from plugins_admin.what_if_form import PREEMPT, PreviewFormError, form_rows, preview_view, submitted_changes, with_changes
from scheduling.plugins.preempt import STAGES as PREEMPT_STAGES
from scheduling.replay.reports import ReplayReport, latest_report
from scheduling.selectors import plugin_specs

TEMPLATE = "plugins_admin/plugins.html"
REPLAY_TEMPLATE = "plugins_admin/replay_report.html"
# How to make a report, shown where there is none yet.
REPLAY_COMMAND = "python manage.py replay_trace --from-db --since 24h --policy spread,binpack,fgd --report"
WHAT_IF_TEMPLATE = "plugins_admin/_what_if.html"
HISTORY_LENGTH = 20
# Parts of the page a browser may re-fetch alone; the scheduler panel polls so that API changes show up too.
REFRESHABLE_FRAGMENTS = {"plugin-table", "scheduler-panel", "history"}
CHANNEL_LABELS = {
    NotificationChannel.Kind.WEBHOOK: ("Webhook", "URL", "https://hooks.example.com/heteroflow"),
    NotificationChannel.Kind.EMAIL: ("E-mail", "Recipients", "ops@example.com, oncall@example.com"),
}
PREEMPT_STAGE_LABELS = {
    "disabled": "Disabled — never preempt",
    "scheduled": "Scheduled or running victims",
    "running": "Running victims only",
}


@staff_required
@require_http_methods(["GET", "POST"])
def plugins_page(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        # A part of the page that refreshes itself asks for itself: htmx names it in the HX-Target header.
        if request.htmx and request.htmx.target in REFRESHABLE_FRAGMENTS:
            return render_page(request, TEMPLATE, _plugin_context(), fragment=request.htmx.target)
        return render_page(request, TEMPLATE, _page_context())
    handle = FORMS.get(request.POST.get("form", ""))
    if handle is None:
        return HttpResponseBadRequest("unknown form")
    try:
        return handle(request)
    except UnknownPlugin as exc:
        raise Http404(f"no plugin named {exc}") from None


def _toggle(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "")
    enabled = request.POST.get("enabled") == "true"
    return _plugin_change(request, name, "enabled",
                          lambda: plugin_set_enabled(name=name, enabled=enabled, actor=request.user))


def _weight(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "")
    raw = request.POST.get("weight", "").strip()
    weight = positive_int_or_none(raw)
    if weight is None:
        return _plugin_errors(request, name, "weight", "enter a whole number from 0 to 100", submitted=raw)
    return _plugin_change(request, name, "weight",
                          lambda: plugin_update(name=name, weight=weight, actor=request.user), submitted=raw)


def _settings(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "")
    schema = plugin_spec(plugin_specs(), name).settings_schema
    try:
        typed, extra = submitted_settings(schema, request.POST)
    except SettingsFormError as refused:
        return _settings_errors(request, name, refused.errors, submitted=dict(request.POST.items()))
    try:
        plugin_update(name=name, extra=extra, actor=request.user)
    except DomainError as exc:
        return _settings_errors(request, name, {_setting_at_fault(exc, schema): exc.message}, submitted=typed)
    if not request.htmx:
        messages.success(request, f"Saved {name}.")
        return redirect(request.path)
    return render_page(request, TEMPLATE, _plugin_context(notice=name), fragment="plugin-update")


def _settings_preview(request: HttpRequest) -> HttpResponse:
    """The settings form's "Preview": the what-if card under the typed settings, filled in so that its Save saves
    exactly what was previewed."""
    name = request.POST.get("name", "")
    schema = plugin_spec(plugin_specs(), name).settings_schema
    try:
        typed, extra = submitted_settings(schema, request.POST)
        preview = plugin_change_preview(requests=[PluginChangeRequest(name=name, extra=extra)])
    except SettingsFormError as refused:
        return _retargeted(_settings_errors(request, name, refused.errors, submitted=dict(request.POST.items())))
    except DomainError as exc:
        return _retargeted(_settings_errors(request, name, {_setting_at_fault(exc, schema): exc.message},
                                            submitted=typed))
    asked = {"preempt_stage": extra.get("preempt_stage", "")} if name == PREEMPT else {"settings": json.dumps(extra)}
    return _what_if_card(request, preview=preview_view(preview), submitted={name: asked})


def _retargeted(response: HttpResponse) -> HttpResponse:
    # A refused preview shows its errors in the plugin table, beside the fields, not in the what-if card.
    response["HX-Retarget"] = "#plugin-table"
    response["HX-Reswap"] = "outerHTML"
    return response


def _setting_at_fault(exc: DomainError, schema: Any) -> str:
    """The setting a refusal names (`extra.max_moves`, `[0].extra.max_moves`); one of `extra` as a whole goes above
    the fields."""
    field = exc.field or ""
    return field.rpartition("extra.")[2] if "extra." in field else (AS_JSON if schema is None else "settings")


def _settings_errors(request: HttpRequest, name: str, errors: dict[str, str], *,
                     submitted: dict[str, str]) -> HttpResponse:
    values = {key.removeprefix(FIELD_PREFIX): value for key, value in submitted.items()}
    refusal = {name: {"settings": errors, "submitted_settings": values}}
    if not request.htmx:
        return render_page(request, TEMPLATE, _page_context(errors=refusal), status=400)
    return render_page(request, TEMPLATE, _plugin_context(errors=refusal), fragment="plugin-table")


def _plugin_change(request: HttpRequest, name: str, field: str, change: Callable[[], Any], *,
                   submitted: str = "") -> HttpResponse:
    try:
        change()
    except DomainError as exc:
        # A setting's refusal (`extra.cpu_weight`) goes beside the settings field.
        page_field = (exc.field or field).partition(".")[0]
        return _plugin_errors(request, name, page_field, exc.message, submitted=submitted)
    if not request.htmx:
        messages.success(request, f"Saved {name}.")
        return redirect(request.path)
    return render_page(request, TEMPLATE, _plugin_context(notice=name), fragment="plugin-update")


def _plugin_errors(request: HttpRequest, name: str, field: str, message: str, *, submitted: str) -> HttpResponse:
    errors = {name: {field: message, "submitted": submitted}}
    if not request.htmx:
        return render_page(request, TEMPLATE, _page_context(errors=errors), status=400)
    return render_page(request, TEMPLATE, _plugin_context(errors=errors), fragment="plugin-table")


def _channel_save(request: HttpRequest) -> HttpResponse:
    kind = request.POST.get("kind", "")
    submitted = {
        "enabled": request.POST.get("enabled") == "true",
        "target": request.POST.get("target", ""),
        "events": request.POST.getlist("events"),
    }
    try:
        notification_channel_update(kind=kind, actor=request.user, **submitted)
    except DomainError as exc:
        card = _channel_card(NotificationChannel(kind=kind, **submitted), errors={exc.field or "target": exc.message})
        if not request.htmx:
            return render_page(request, TEMPLATE, _page_context(channel_override=card), status=400)
        return render_page(request, TEMPLATE, {"channel": card}, fragment="channel-card")
    if not request.htmx:
        messages.success(request, f"Saved the {kind} channel.")
        return redirect(request.path)
    saved = next(channel for channel in notification_channels() if channel.kind == kind)
    context = {"channel": _channel_card(saved, saved_note=True), "history": _history_rows()}
    return render_page(request, TEMPLATE, context, fragment="channel-update")


def _channel_test(request: HttpRequest) -> HttpResponse:
    kind = request.POST.get("kind", "")
    try:
        result = notification_channel_test(kind=kind)
        outcome = {"ok": result.ok, "detail": result.detail}
    except DomainError as exc:
        outcome = {"ok": False, "detail": exc.message}
    if not request.htmx:
        (messages.success if outcome["ok"] else messages.error)(request, f"Test via {kind}: {outcome['detail']}")
        return redirect(request.path)
    return render_page(request, TEMPLATE, {"kind": kind, "test": outcome}, fragment="test-result")


def _what_if_preview(request: HttpRequest) -> HttpResponse:
    names = [plugin["name"] for plugin in plugin_listing()]
    submitted, _ = submitted_changes(request.POST, names)
    try:
        preview = with_changes(request.POST, names, lambda requests: plugin_change_preview(requests=requests))
    except PreviewFormError as refused:
        return _what_if_card(request, errors=refused.errors, submitted=submitted, status=400)
    return _what_if_card(request, preview=preview_view(preview), submitted=submitted)


def _what_if_save(request: HttpRequest) -> HttpResponse:
    names = [plugin["name"] for plugin in plugin_listing()]
    submitted, entries = submitted_changes(request.POST, names)
    try:
        with_changes(request.POST, names,
                     lambda requests: plugin_changes_apply(requests=requests, actor=request.user))
    except PreviewFormError as refused:
        return _what_if_card(request, errors=refused.errors, submitted=submitted, status=400)
    saved = ", ".join(entry["name"] for entry in entries) or "nothing"
    if not request.htmx:
        messages.success(request, f"Saved {saved}.")
        return redirect(request.path)
    return render_page(request, WHAT_IF_TEMPLATE, {**_plugin_context(), "saved": saved}, fragment="what-if-saved")


def _what_if_card(request: HttpRequest, *, submitted: dict, errors: dict | None = None, preview: dict | None = None,
                  status: int = 200) -> HttpResponse:
    errors = errors or {}
    context = {**(_page_context() if not request.htmx else _plugin_context()), "preview": preview,
               "what_if_errors": errors}
    context["what_if_rows"] = form_rows(context["plugins"], submitted=submitted, errors=errors)
    if not request.htmx:
        return render_page(request, TEMPLATE, context, status=status)
    # htmx swaps only successful answers: the refusals come back as the card with its errors beside the fields.
    return render_page(request, WHAT_IF_TEMPLATE, context, fragment="what-if-card")


@staff_required
@require_http_methods(["GET"])
def replay_report_page(request: HttpRequest) -> HttpResponse:
    report = latest_report()
    return render_page(request, REPLAY_TEMPLATE, {"report": _replay_view(report) if report else None,
                                                  "replay_command": REPLAY_COMMAND})


@staff_required
@require_http_methods(["GET"])
def replay_report_chart(request: HttpRequest) -> FileResponse:
    report = latest_report()
    if report is None:
        raise Http404("no replay report yet")
    response = FileResponse(report.chart_path.open("rb"), content_type="image/svg+xml")
    # The file is replaced by every new report; and an SVG opened on its own may run nothing.
    response["Cache-Control"] = "private, no-cache"
    response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    return response


def _replay_view(report: ReplayReport) -> dict[str, Any]:
    figures = report.figures
    dynamic = figures.get("mode") == "dynamic"
    rows = []
    for name, summary in figures.get("policies", {}).items():
        if dynamic:
            # Per size class: never placed, p99 wait in minutes (the chart's right panel), each mean ± stdev.
            classes = [{"size": size, "never_placed": _mean_stdev(cell.get("never_placed")),
                        "wait_p99_min": _mean_stdev(_in_minutes(cell.get("wait_p99")))}
                       for size, cell in summary.get("classes", {}).items()]
            rows.append({"name": name, "classes": classes,
                         **{key: _mean_stdev(summary.get(key)) for key in
                            ("time_weighted_allocation", "never_placed", "jain")}})
        else:
            rows.append({"name": name, **{key: _mean_stdev(summary.get(key)) for key in
                                          ("allocation_at_full", "allocation_at_arrival", "failed_tasks",
                                           "fragmentation")}})
    return {"made_at": report.made_at, "policies": report.policies, "window": report.window, "figures": figures,
            "rows": rows, "from_db": figures.get("source") == "database", "dynamic": dynamic}


def _in_minutes(figure: Any) -> Any:
    if not isinstance(figure, dict):
        return figure
    return {key: value / 60 for key, value in figure.items() if isinstance(value, int | float)}


def _mean_stdev(figure: Any) -> str:
    if not isinstance(figure, dict):
        return "—"
    return f"{figure.get('mean', 0):.2f} ± {figure.get('stdev', 0):.2f}"


FORMS: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "toggle": _toggle,
    "weight": _weight,
    "settings": _settings,
    "settings-preview": _settings_preview,
    "channel": _channel_save,
    "channel-test": _channel_test,
    "what-if": _what_if_preview,
    "what-if-save": _what_if_save,
}


def _page_context(*, errors: dict | None = None, channel_override: dict | None = None) -> dict[str, Any]:
    channels = [_channel_card(channel) for channel in notification_channels()]
    if channel_override:
        channels = [channel_override if card["kind"] == channel_override["kind"] else card for card in channels]
    report = latest_report()
    return {**_plugin_context(errors=errors), "channels": channels,
            "replay_report": _replay_view(report) if report else None, "replay_command": REPLAY_COMMAND}


def _plugin_context(*, errors: dict | None = None, notice: str = "") -> dict[str, Any]:
    errors = errors or {}
    specs = plugin_specs()
    plugins = []
    for plugin in plugin_listing():
        refused = errors.get(plugin["name"], {})
        fields = setting_fields(specs[plugin["name"]].settings_schema, plugin["extra"],
                                submitted=refused.get("submitted_settings"), errors=refused.get("settings"),
                                choice_labels=PREEMPT_STAGE_LABELS if plugin["name"] == "preempt" else None)
        plugins.append({**plugin, "extra_json": json.dumps(plugin["extra"]), "errors": refused,
                        "setting_fields": fields})
    return {
        "plugins": plugins,
        "scheduler": _scheduler_view(scheduler_plugins()),
        "history": _history_rows(),
        "preempt_stages": [(stage, PREEMPT_STAGE_LABELS.get(stage, stage)) for stage in PREEMPT_STAGES],
        "notice": notice,
        "always_on_reason": ALWAYS_ON_REASON,
    }


def _scheduler_view(held: dict[str, Any]) -> dict[str, Any]:
    """The set the scheduler holds, with each scorer's share of the total weight for the panel's bars."""
    total = sum(scorer["weight"] for scorer in held["scorers"]) or 1
    scorers = [{**scorer, "share": round(100 * scorer["weight"] / total)} for scorer in held["scorers"]]
    return {**held, "scorers": scorers}


def _channel_card(channel: NotificationChannel, *, errors: dict | None = None, saved_note: bool = False) -> dict:
    label, target_label, placeholder = CHANNEL_LABELS[channel.kind]
    return {
        "kind": channel.kind,
        "label": label,
        "target_label": target_label,
        "placeholder": placeholder,
        "enabled": channel.enabled,
        "target": channel.target,
        "events": [(event, event in channel.events) for event in CHANNEL_EVENTS],
        "errors": errors or {},
        "saved_note": saved_note,
    }


def _history_rows() -> list[dict[str, Any]]:
    return [_history_row(change) for change in plugin_history(limit=HISTORY_LENGTH)]


def _history_row(change: PluginChange) -> dict[str, Any]:
    keys = [key for key in {**change.before, **change.after} if change.before.get(key) != change.after.get(key)]
    return {
        "at": change.at,
        "actor": change.actor.username if change.actor else "system",
        "plugin": change.plugin.removeprefix(NOTIFICATION_AUDIT_PREFIX),
        "is_notification": change.plugin.startswith(NOTIFICATION_AUDIT_PREFIX),
        "diff": [(key, _shown(change.before.get(key)), _shown(change.after.get(key))) for key in keys],
    }


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{key}={item}" for key, item in value.items()) or "—"
    if isinstance(value, list):
        return ", ".join(str(item) for item in value) or "—"
    if value in (None, ""):
        return "—"
    return str(value)
