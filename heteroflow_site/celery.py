import os

from celery import Celery
from django.conf import settings
from django.utils.module_loading import import_string

from heteroflow_site.periodic_jobs import RUN_JOB_TASK

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "heteroflow_site.settings")

app = Celery("heteroflow")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.task(name=RUN_JOB_TASK, ignore_result=True)
def run_periodic_job(name: str) -> str:
    """Run one job of heteroflow_site.periodic_jobs by its name (Celery beat's entries name it)."""
    job = next(job for job in settings.PERIODIC_JOBS if job.name == name)
    return import_string(job.function)()
