from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.module_loading import import_string

from heteroflow_site.configuration import configuration_error


def run_loops_jobs() -> dict[str, str]:
    """The periodic jobs run_loops runs, by name, in the table's order, with the dotted path of their function."""
    return {job.name: job.function for job in settings.PERIODIC_JOBS if job.in_run_loops}


class Command(BaseCommand):
    help = ("Run every periodic job once, in-process, and print what each did (design §15.7): "
            + ", ".join(run_loops_jobs()) + ".")

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", required=True,
                            help="run each job one time and exit (the only mode: Celery beat runs them on periods)")
        parser.add_argument("--only", nargs="+", metavar="NAME", choices=list(run_loops_jobs()),
                            help="run only these jobs, in the order given")

    def handle(self, *args, once: bool, only: list[str] | None, **options):
        jobs = run_loops_jobs()
        for name in only or jobs:
            try:
                outcome = import_string(jobs[name])()
            except Exception as exc:
                if configuration_error(exc) is not None:
                    raise  # manage.py says what to fix (an unreachable database is no fault of this job)
                raise CommandError(f"{name}: {exc}") from exc
            self.stdout.write(f"{name}: {outcome}")
