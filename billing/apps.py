from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"

    def ready(self) -> None:
        """Billing's pages, a tenant member's home, its demo step and alert kinds,
        registered with the kernel."""
        from portal.demo import Part, demo_steps_register
        from portal.models import Role
        from portal.shell import NavItem, home_register, pages_register

        pages_register(
            NavItem("SLA", "sla-page", "Factory"),
            NavItem("Invoices", "invoices", "Billing"),
            NavItem("Credit notes", "credit-notes-page", "Billing"),
            NavItem("Month-end close", "close-page", "Billing"),
            NavItem("Receivables", "receivables-page", "Billing"),
            NavItem("Balances", "balances-page", "Billing"),
            NavItem("Ledger", "ledger", "Billing"),
            NavItem("Price realization", "realization", "Billing"),
            NavItem("Price book", "price-book", "Billing"),
            NavItem("Reservations", "reservations-page", "Billing"),
        )
        home_register(Role.TENANT, "billing.views.home.tenant_home")
        demo_steps_register(Part.BOOKS, "billing.demo.demo_billing")
        _alert_kinds_register()


def _alert_kinds_register() -> None:
    """Billing's alert kinds (portal.alert_kinds): a tenant's budget, its uptime below its
    tier; and the contracts' SLO targets that tenants' burn rules fall back to."""
    from functools import partial

    from django.conf import settings

    from billing.domain.budget import BUDGET, budget_one_key, budget_params_check
    from billing.domain.reservations import (
        OVERAGE,
        UNDERUSED,
        overage_params_check,
        underused_params_check,
    )
    from billing.selectors.budget import budget_evaluate
    from billing.selectors.pricing import contract_slo_targets
    from billing.selectors.reservations import (
        reservation_overage_evaluate,
        reservation_underused_evaluate,
    )
    from billing.selectors.uptime import (
        uptime_evaluate,
        uptime_params_check,
        uptime_threshold_shown,
    )
    from portal.alert_kinds import (
        Kind,
        Param,
        kind_register,
        shown_with_unit,
        tenant_slo_targets_provide,
    )
    from portal.models import Role

    def tenant_kind(**fields) -> Kind:
        """A kind of one tenant's (a rule names it), held by finance and its members."""
        return Kind(holders=frozenset({Role.FINANCE, Role.TENANT}), tenant="required", **fields)

    kind_register(
        tenant_kind(
            name=BUDGET,
            params_check=partial(budget_params_check, currency=settings.FACTORY_CURRENCY),
            one_per_tenant=True,
            one_key=budget_one_key,
            scope_keys=frozenset({"project"}),
            evaluate=budget_evaluate,
            fired_event="budget.threshold_reached",
            threshold_shown=shown_with_unit("{}% of the budget"),
            params=(
                Param("amount", "Amount", "decimal", "a period, in the tenant's currency"),
                Param("tokens", "or tokens", help="a period, input and output"),
                Param("thresholds", "Thresholds (%)", "percents", "default 50, 80, 100"),
                Param("period", "Period", "choice", "default month", ("month", "day")),
                Param("enforce", "Enforce", "choice", "hard: gateways block", ("soft", "hard")),
            ),
            summary="spend this month or day reaching each threshold of the tenant's or one "
            "of its projects' budget",
        )
    )
    kind_register(
        tenant_kind(
            name="uptime_below_tier",
            params_check=uptime_params_check,
            evaluate=uptime_evaluate,
            threshold_shown=uptime_threshold_shown,
            summary="month-to-date uptime below the highest credit threshold of the "
            "tenant's contract",
        )
    )
    kind_register(
        tenant_kind(
            name=OVERAGE,
            params_check=overage_params_check,
            evaluate=reservation_overage_evaluate,
            threshold_shown=shown_with_unit("{}%"),
            params=(
                Param("percent", "Overage above (%)", help="of the reserved capacity; default 20"),
                Param("hours", "For hours", help="each of the last complete hours; default 3"),
            ),
            summary="a tenant's on-demand tokens on a reserved deployment above a share of "
            "its reserved capacity, hour after hour",
        )
    )
    kind_register(
        tenant_kind(
            name=UNDERUSED,
            params_check=underused_params_check,
            evaluate=reservation_underused_evaluate,
            threshold_shown=shown_with_unit("{}%"),
            params=(
                Param("percent", "Utilization below (%)", help="default 50"),
                Param("days", "Over days", help="the last days; default 7"),
            ),
            summary="a tenant's utilization of its reservations on a deployment below a "
            "share over the last days",
        )
    )
    tenant_slo_targets_provide(contract_slo_targets)
