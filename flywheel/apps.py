from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "flywheel"

    def ready(self) -> None:
        """The flywheel's pages, the staff's home, its demo steps and alert kinds,
        registered with the kernel."""
        from portal.demo import Part, demo_steps_register
        from portal.models import Role
        from portal.shell import NavItem, home_register, pages_register

        pages_register(
            NavItem("Flywheel", "flywheel", "Economics"),
            NavItem("Investor view", "investor", "Economics"),
            NavItem("Cockpit", "cockpit", "Economics"),
            NavItem("Capacity plan", "capacity-plan-page", "Economics"),
            NavItem("TFOM reports", "tfom-reports", "Economics"),
            NavItem("Projects and chargeback", "projects", "Economics"),
        )
        for role in (Role.OPERATOR, Role.INVESTOR):
            home_register(role, "flywheel.views.kpis.overview")
        home_register(Role.FINANCE, "flywheel.views.kpis.finance_home")
        demo_steps_register(Part.COSTS, "flywheel.demo.demo_costs")
        demo_steps_register(
            Part.FIGURES,
            "flywheel.demo.demo_snapshots",
            "flywheel.demo.demo_forecasts",
            "flywheel.demo.demo_flywheel",
            "flywheel.demo.demo_alerts",
        )
        _alert_kinds_register()


def _alert_kinds_register() -> None:
    """The flywheel's alert kinds (portal.alert_kinds), operators' only: a pool wasting
    healthy GPUs, and a closed day's TEF or TFI below a threshold."""
    from flywheel.domain.alerts import (
        gpu_waste_params_check,
        gpu_waste_threshold_shown,
        gpu_waste_value_shown,
        kpi_below_band_params_check,
        kpi_threshold_shown,
        kpi_value_shown,
    )
    from flywheel.selectors.alerts import (
        gpu_waste_evaluate,
        kpi_below_band_evaluate,
        pool_options,
        pool_scope_check,
    )
    from portal.alert_kinds import Kind, Param, kind_register

    def pool_kind(**fields) -> Kind:
        """A kind of operators' only (no other role holds it), per pool."""
        return Kind(
            holders=frozenset(),
            scope_keys=frozenset({"pool"}),
            scope_check=pool_scope_check,
            scope_options=pool_options,
            **fields,
        )

    kind_register(
        pool_kind(
            name="gpu_waste",
            params_check=gpu_waste_params_check,
            evaluate=gpu_waste_evaluate,
            condition=True,
            params=(
                Param("window_hours", "Window (hours)", help="default 3"),
                Param(
                    "threshold_pct",
                    "Threshold (%)",
                    "decimal",
                    "of the pool's healthy GPU-hours idle; default 10",
                ),
            ),
            threshold_shown=gpu_waste_threshold_shown,
            value_shown=gpu_waste_value_shown,
            summary="leaves healthy GPUs idle: idle GPU-hours over the window above a "
            "share of its healthy GPU-hours, with what they cost",
        )
    )
    kind_register(
        pool_kind(
            name="kpi_below_band",
            params_check=kpi_below_band_params_check,
            evaluate=kpi_below_band_evaluate,
            params=(
                Param("kpi", "KPI", "choice", choices=("tef", "tfi")),
                Param("threshold", "Threshold", "decimal", "fires below it, such as 0.6"),
            ),
            threshold_shown=kpi_threshold_shown,
            value_shown=kpi_value_shown,
            summary="a closed day's TEF or TFI below a threshold",
        )
    )
