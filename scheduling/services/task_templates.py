"""A tenant's task templates: named submissions to start from (design §16.4's loop; Slurm users keep batch scripts
for the same reason)."""

from django.db import IntegrityError, transaction

from heteroflow_site.errors import Conflict
from scheduling.models import TaskTemplate
from tenants.models import Tenant


def task_template_create(*, tenant: Tenant, name: str, fields: dict) -> TaskTemplate:
    """Store `fields` (a submission `TaskInput` validated, JSON-ready) under `name`; a name the tenant already uses
    is a 409 naming `name`."""
    try:
        with transaction.atomic():
            return TaskTemplate.objects.create(tenant=tenant, name=name, fields=fields)
    except IntegrityError:
        raise Conflict(f"a template named {name!r} exists: delete it first or choose another name",
                       field="name") from None


def task_template_delete(*, template: TaskTemplate) -> None:
    TaskTemplate.objects.filter(id=template.id).delete()
