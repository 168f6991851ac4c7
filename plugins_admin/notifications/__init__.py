"""Notification plugins: a webhook or a mailbox told when a task fails, is preempted or succeeds.

`delivery` hears task transitions and sends (in a Celery task), `services` writes the channels, `selectors` reads them.
"""
