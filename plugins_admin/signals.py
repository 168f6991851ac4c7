from django.dispatch import Signal

# Sent after the commit of a plugin-set change, with `names` (the plugins whose rows changed) and `actor`.
# The scheduler reads the set through `scheduling.selectors.current_plugin_set()`; anything that caches it
# (a long-running scheduler loop, a live page) listens here to drop its copy.
plugin_set_changed = Signal()
