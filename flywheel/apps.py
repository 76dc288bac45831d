from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "flywheel"

    def ready(self) -> None:
        """The flywheel's alert kinds (portal.alerts), operators' only: a pool wasting
        healthy GPUs, and a closed day's TEF or TFI below a threshold."""
        from flywheel.domain.alerts import gpu_waste_params_check, kpi_below_band_params_check
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
                threshold_shown="{}%",
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
                summary="a closed day's TEF or TFI below a threshold",
            )
        )
