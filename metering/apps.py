from django.apps import AppConfig


class MeteringConfig(AppConfig):
    name = "metering"

    def ready(self) -> None:
        """Metering's pages, demo steps and alert kinds, registered with the kernel."""
        from portal.demo import Part, demo_steps_register
        from portal.shell import NavItem, pages_register

        pages_register(
            NavItem("Usage", "usage", "Factory"),
            NavItem("Metering", "metering", "Factory"),
            NavItem("Incidents", "incidents", "Factory"),
        )
        demo_steps_register(
            Part.FACTORY, "metering.demo.factory.demo_factory", "metering.demo.factory.demo_curves"
        )
        demo_steps_register(
            Part.HISTORY,
            "metering.demo.usage.demo_usage",
            "metering.demo.sla.demo_incidents",
            "metering.demo.telemetry.demo_engine_telemetry",
        )
        alert_kinds_register()


def alert_kinds_register() -> None:
    """Metering's alert kinds (portal.alerts; kpis.md section 3c), each evaluated from
    metering's read models; all condition kinds (one alert firing while each holds)."""
    _burn_kind_register()
    _plumbing_kinds_register()


def _burn_kind_register() -> None:
    """A burn rate: the factory's or a tenant's (its members hold it on their own scope)."""
    from metering.domain.burn import (
        burn_threshold_shown,
        burn_value_shown,
        slo_burn_params_check,
    )
    from metering.selectors.alerts import deployment_options, deployment_scope_check
    from metering.selectors.burn import slo_burn_evaluate
    from portal.alert_kinds import Kind, Param, kind_register
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
            params=(
                Param(
                    "target",
                    "Target",
                    "decimal",
                    "share of requests that must be compliant, "
                    "such as 0.995; blank: the contract's, else the deployment version's",
                ),
                Param(
                    "min_requests",
                    "Minimum requests",
                    help="a long window with fewer never fires; default 100",
                ),
            ),
            scope_options=deployment_options,
            threshold_shown=burn_threshold_shown,
            value_shown=burn_value_shown,
            summary="burns its error budget too fast: both windows of a pair above the "
            "pair's factor (1 h and 5 min 14.4, 6 h and 30 min 6, 3 d and 6 h 1)",
        )
    )


def _plumbing_kinds_register() -> None:
    """The factory's plumbing: operators only (they hold every kind), per deployment,
    source or scrape target."""
    from metering.domain.alerts import (
        reconciliation_drift_params_check,
        scrape_down_params_check,
        source_silent_params_check,
    )
    from metering.selectors.alerts import (
        deployment_options,
        deployment_scope_check,
        reconciliation_drift_evaluate,
        scrape_down_evaluate,
        scrape_down_scope_check,
        scrape_target_options,
        source_options,
        source_silent_evaluate,
        source_silent_scope_check,
    )
    from portal.alert_kinds import Kind, Param, kind_register, shown_with_unit

    plumbing = (
        ("reconciliation_drift", reconciliation_drift_params_check, deployment_scope_check,
         reconciliation_drift_evaluate, "deployment", deployment_options,
         Param("hours", "Hours", help="consecutive flagged whole hours; default 2"),
         "{} h in a row",
         "meters tokens its engines did not generate, or misses tokens they did, hour after "
         "hour (beyond 1% of the engine's, at least 10,000)"),
        ("source_silent", source_silent_params_check, source_silent_scope_check,
         source_silent_evaluate, "source", source_options,
         Param("minutes", "Minutes", help="without a batch; default 15"), "{} min quiet",
         "sent usage in the last day, then none for N minutes while its engines generate"),
        ("scrape_down", scrape_down_params_check, scrape_down_scope_check,
         scrape_down_evaluate, "scrape_target", scrape_target_options,
         Param("failures", "Failures", help="consecutive failed scrapes; default 4"),
         "{} failures in a row",
         "a /metrics target failing scrape after scrape"),
    )  # fmt: skip
    for name, params_check, scope_check, evaluate, key, options, param, shown, summary in plumbing:
        kind_register(
            Kind(
                name=name,
                params_check=params_check,
                scope_check=scope_check,
                evaluate=evaluate,
                holders=frozenset(),
                scope_keys=frozenset({key}),
                condition=True,
                params=(param,),
                scope_options=options,
                threshold_shown=shown_with_unit(shown),
                summary=summary,
            )
        )
