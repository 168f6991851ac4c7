"""What a change of the plugin set would do, before it is saved (issue 17)."""

from collections.abc import Sequence
from typing import Any

from plugins_admin.rules import PluginChangeRequest, settings_after
from scheduling.selectors import plugin_specs
from scheduling.what_if.plugin_sets import plugin_set_preview


def plugin_change_preview(*, requests: Sequence[PluginChangeRequest]) -> dict[str, Any]:
    """The head of the pending queue placed under the current plugin set and under it with `requests` saved
    (checked by the rules saving applies: a refusal is the DomainError saving would raise); nothing is written."""
    specs = plugin_specs()
    return plugin_set_preview(change=lambda current: settings_after(current, requests, specs))
