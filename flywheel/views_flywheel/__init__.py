"""The flywheel page: diagnosis ranked with evidence, the scenario simulator (sliders and
lever checkboxes recomputed through POST /api/v1/flywheel/scenarios), goal status, the
lever catalogue, and the cycle history with projected against realized uplift.

Operators also write here: mark a lever applied, add a lever or goal version, run a cycle.
"""

from flywheel.views_flywheel.charts import diagnosis_chart, factors_chart, realized_chart
from flywheel.views_flywheel.page import flywheel

__all__ = [
    "diagnosis_chart",
    "factors_chart",
    "flywheel",
    "realized_chart",
]
