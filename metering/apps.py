from django.apps import AppConfig


class MeteringConfig(AppConfig):
    name = "metering"

    def ready(self) -> None:
        alert_kinds_register()


def alert_kinds_register() -> None:
    """Metering's alert kinds (portal.alerts; kpis.md section 3c), each evaluated from
    metering's read models."""
    from metering.domain.alerts import (
        reconciliation_drift_params_check,
        scrape_down_params_check,
        source_silent_params_check,
    )
    from metering.selectors.alerts import (
        deployment_scope_check,
        reconciliation_drift_evaluate,
        scrape_down_evaluate,
        scrape_down_scope_check,
        source_silent_evaluate,
        source_silent_scope_check,
    )
    from portal.alerts import Kind, kind_register

    # The factory's plumbing: operators only (they hold every kind), per deployment,
    # source or scrape target; condition kinds, one alert firing while each holds.
    kind_register(
        Kind(
            name="reconciliation_drift",
            params_check=reconciliation_drift_params_check,
            scope_check=deployment_scope_check,
            evaluate=reconciliation_drift_evaluate,
            holders=frozenset(),
            scope_keys=frozenset({"deployment"}),
            condition=True,
        )
    )
    kind_register(
        Kind(
            name="source_silent",
            params_check=source_silent_params_check,
            scope_check=source_silent_scope_check,
            evaluate=source_silent_evaluate,
            holders=frozenset(),
            scope_keys=frozenset({"source"}),
            condition=True,
        )
    )
    kind_register(
        Kind(
            name="scrape_down",
            params_check=scrape_down_params_check,
            scope_check=scrape_down_scope_check,
            evaluate=scrape_down_evaluate,
            holders=frozenset(),
            scope_keys=frozenset({"scrape_target"}),
            condition=True,
        )
    )
    # slo_burn (held by tenants too, on their own scope) registers here.
    from metering.domain.burn import slo_burn_params_check
    from metering.selectors.alerts import deployment_scope_check
    from metering.selectors.burn import slo_burn_evaluate
    from portal.models import Role

    kind_register(
        Kind(
            name="slo_burn",
            params_check=slo_burn_params_check,
            scope_check=deployment_scope_check,
            evaluate=slo_burn_evaluate,
            holders=frozenset({Role.TENANT}),
            tenant="optional",
            scope_keys=frozenset({"deployment"}),
            condition=True,
        )
    )
