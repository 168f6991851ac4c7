"""Celery entry points of the scheduling tickers (SPEC §4). Each is a thin call into the module that owns the work."""

from celery import shared_task
