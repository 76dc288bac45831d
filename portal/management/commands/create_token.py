from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from portal.models import Project, Role, Tenant
from portal.projects import no_project_message
from portal.services import token_create, user_ensure


class Command(BaseCommand):
    help = (
        "Create an API token (creating the user with that role when missing). "
        "The token alone is printed on the last line."
    )

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True)
        parser.add_argument("--role", required=True, choices=[r.value for r in Role])
        parser.add_argument("--scopes", required=True, help="Comma-separated: read,ingest,admin")
        parser.add_argument("--tenant", help="Tenant slug (required for --role tenant)")
        parser.add_argument(
            "--bind-tenant",
            help="Bind an ingest token to this tenant: it meters that tenant only (a gateway "
            "of the tenant's own), and OTLP spans without a tenant attribute are that tenant's",
        )
        parser.add_argument(
            "--bind-project",
            help="And to this project of that tenant (its slug): its events without a "
            "project are that project's, naming another is refused",
        )
        parser.add_argument("--name", default="cli")

    def handle(self, *args, **options):
        role = Role(options["role"])
        tenant = None
        if options["tenant"]:
            tenant = Tenant.objects.filter(slug=options["tenant"]).first()
            if tenant is None:
                raise CommandError(f"No tenant {options['tenant']!r}.")
        bound = None
        if options["bind_tenant"]:
            bound = Tenant.objects.filter(slug=options["bind_tenant"]).first()
            if bound is None:
                raise CommandError(f"No tenant {options['bind_tenant']!r}.")
        project = None
        if options["bind_project"]:
            owner = bound or tenant  # a member's token is bound to its own tenant
            if owner is None:
                raise CommandError("--bind-project needs --bind-tenant: the project's tenant.")
            project = Project.objects.filter(tenant=owner, slug=options["bind_project"]).first()
            if project is None:
                raise CommandError(
                    no_project_message(slug=options["bind_project"], tenant=owner.slug)
                )
        scopes = [s.strip() for s in options["scopes"].split(",") if s.strip()]
        try:
            user = user_ensure(username=options["user"], role=role, tenant=tenant)
            token, raw = token_create(
                user=user,
                name=options["name"],
                scopes=scopes,
                bound_tenant=bound,
                bound_project=project,
            )
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            ) from exc
        bound_to = f", bound to tenant {bound.slug}" if bound else ""
        bound_to += f" and its project {project.slug}" if project else ""
        self.stderr.write(
            f"Token {token.prefix}… for {user.username} ({role.value}) scopes "
            f"{','.join(token.scopes)}{bound_to}"
        )
        self.stdout.write(raw)
