from celery import shared_task
