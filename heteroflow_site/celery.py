import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heteroflow_site.settings")

app = Celery("heteroflow")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
