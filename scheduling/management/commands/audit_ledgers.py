"""`manage.py audit_ledgers [--fix]`: recount every node's and tenant's ledgers and the usage records from the tasks,
print differences."""

from django.core.management.base import BaseCommand

from scheduling.housekeeping.ledger_audit import ledger_audit
from scheduling.housekeeping.node_ledger import node_ledgers_correct
from tenants.models import Tenant


class Command(BaseCommand):
    help = ("Recount every node's and tenant's GPU ledgers from the tasks, compare them with the stored values and "
            "with what the agents last reported, print the differences; --fix corrects the stored ledgers (with an "
            "audit row each). Exits 1 when a wrong stored ledger is left uncorrected.")

    def add_arguments(self, parser):
        parser.add_argument("--fix", action="store_true", help="correct wrong stored ledgers")

    def handle(self, *args, fix: bool, **options):
        audit = ledger_audit()
        for node in audit.differences:
            for finding in node.findings():
                self.stdout.write(f"node {node.name}: {finding}")
        for tenant in audit.tenants:
            if tenant.over_quota:
                self.stdout.write(f"tenant {tenant.name}: {tenant.gpus_in_use} GPUs in use, quota {tenant.quota} "
                                  f"(over by {tenant.over_quota})")
        names = dict(Tenant.objects.values_list("id", "name"))
        for difference in audit.usage:
            self.stdout.write(f"tenant {names.get(difference.tenant_id, difference.tenant_id)}: "
                              f"{difference.finding()}")
        wrong = [node for node in audit.nodes if node.gpu_used_wrong]
        self.stdout.write(f"{len(audit.nodes)} nodes, {len(audit.tenants)} tenants audited: {len(wrong)} wrong "
                          f"gpu_used ledgers, {len(audit.differences)} nodes with differences, "
                          f"{len(audit.usage)} tenant-days of usage records that differ from their tasks")
        quarantined = sum(len(node.quarantined_idle) for node in audit.nodes)
        self.stdout.write(f"{sum(node.free_cards for node in audit.nodes)} cards free; {quarantined} quarantined "
                          "card(s) not counted free")
        if fix:
            for name, before, after in node_ledgers_correct(audit=audit):
                self.stdout.write(f"fixed node {name}: gpu_used {before} -> {after}")
        elif wrong:
            self.stdout.write("run with --fix to correct the stored ledgers")
            raise SystemExit(1)
