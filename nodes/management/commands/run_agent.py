import threading

from django.core.management.base import BaseCommand, CommandError

from nodes.agent.command_line import add_arguments, agent_from, run


class Command(BaseCommand):
    help = "Run the node agent in the foreground against a HeteroFlow server (register first for the token)."

    def add_arguments(self, parser):
        add_arguments(parser)

    def handle(self, *args, **options):
        try:
            agent = agent_from(options)
        except ValueError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"agent running against {options['server']} with the {options['runtime']} runtime; "
                          "Ctrl-C stops it")
        run(agent, options["interval"], threading.Event())
