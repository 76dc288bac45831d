from django.apps import AppConfig


class MeteringConfig(AppConfig):
    name = "metering"

    def ready(self) -> None:
        alert_kinds_register()


def alert_kinds_register() -> None:
    """Metering's alert kinds (portal.alerts; kpis.md section 3c), each evaluated from
    metering's read models; all condition kinds (one alert firing while each holds)."""
    from metering.domain.alerts import (
        reconciliation_drift_params_check,
        scrape_down_params_check,
        source_silent_params_check,
    )
    from metering.domain.burn import slo_burn_params_check
    from metering.selectors.alerts import (
        deployment_scope_check,
        reconciliation_drift_evaluate,
        scrape_down_evaluate,
        scrape_down_scope_check,
        source_silent_evaluate,
        source_silent_scope_check,
    )
    from metering.selectors.burn import slo_burn_evaluate
    from portal.alerts import Kind, kind_register
    from portal.models import Role

    # A burn rate: the factory's or a tenant's (its members hold it on their own scope).
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
    # The factory's plumbing: operators only (they hold every kind), per deployment,
    # source or scrape target.
    for name, params_check, scope_check, evaluate, scope_key in (
        (
            "reconciliation_drift",
            reconciliation_drift_params_check,
            deployment_scope_check,
            reconciliation_drift_evaluate,
            "deployment",
        ),
        (
            "source_silent",
            source_silent_params_check,
            source_silent_scope_check,
            source_silent_evaluate,
            "source",
        ),
        (
            "scrape_down",
            scrape_down_params_check,
            scrape_down_scope_check,
            scrape_down_evaluate,
            "scrape_target",
        ),
    ):
        kind_register(
            Kind(
                name=name,
                params_check=params_check,
                scope_check=scope_check,
                evaluate=evaluate,
                holders=frozenset(),
                scope_keys=frozenset({scope_key}),
                condition=True,
            )
        )
