from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"

    def ready(self) -> None:
        """Billing's alert kinds (portal.alerts): a tenant's budget."""
        from billing.domain.budget import budget_params_check
        from billing.selectors.budget import budget_evaluate
        from portal.alerts import Kind, kind_register
        from portal.models import Role

        kind_register(
            Kind(
                name="budget",
                params_check=budget_params_check,
                evaluate=budget_evaluate,
                holders=frozenset({Role.FINANCE, Role.TENANT}),
                tenant_required=True,
                fired_event="budget.threshold_reached",
            )
        )
