from django.core.management.base import BaseCommand, CommandError

from scheduling.tickers import TICKERS


class Command(BaseCommand):
    help = ("Run every scheduling ticker once, in-process, and print what each did (design §15.7): "
            + ", ".join(TICKERS) + ".")

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", required=True,
                            help="run each ticker one time and exit (the only mode: Celery beat runs them on periods)")
        parser.add_argument("--only", nargs="+", metavar="NAME", choices=list(TICKERS),
                            help="run only these tickers, in the order given")

    def handle(self, *args, once: bool, only: list[str] | None, **options):
        for name in only or TICKERS:
            try:
                outcome = TICKERS[name]()
            except Exception as exc:
                raise CommandError(f"{name}: {exc}") from exc
            self.stdout.write(f"{name}: {outcome}")
