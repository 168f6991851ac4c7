from django.dispatch import Signal

# Sent inside a heartbeat's transaction, while the node's row is locked, with `node_id`. Receivers reconcile what the
# apps above keep about the node (scheduling recounts `gpu_used` from its active tasks) before the node's status is
# derived from it, so they run in the same transaction and must not commit or defer.
heartbeat_recorded = Signal()

# Sent inside the transaction of a change that may let waiting work fit on the node — it came online, its cards or
# labels changed, an admin edited it — with `node_id` and `reason`. Scheduling activates its parked work (design §15.1).
node_changed = Signal()

# Sent after the commit of a heartbeat whose card count differs from the node's previous report by more than one
# card, with `node_id`, `name`, `cards_before`, `cards_after`: an admin should look (design §16.5).
node_cards_changed = Signal()

# Sent inside a heartbeat's transaction, while the node's row is locked, with `node_id` and `cards` (a list of
# `(card_type, index)`) when cards of the node were just quarantined (design §17.3): scheduling stops the tasks on
# them in the same transaction, so no cycle sees a task on a quarantined card as healthy work.
cards_quarantined = Signal()

# Sent after the commit of a quarantine, with `node_id`, `name`, `card_type`, `index`, `reason`: people are told.
card_quarantined_notice = Signal()

# Sent after the commit of a drain's end (no task holds the node any more), with `node_id`, `name`: people are told.
node_drained = Signal()
