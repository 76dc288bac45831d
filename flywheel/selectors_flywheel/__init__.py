"""Reads of the flywheel: the measured baseline of a period, the levers and goal in force,
the diagnosis (with `flywheel.evidence`) and the scenarios built on them by the pure engines
(`flywheel.diagnosis`, `flywheel.scenarios`), and the JSON shapes of the flywheel API.
"""

from flywheel.selectors_flywheel.baseline import baseline_get, baseline_recall, baseline_remember
from flywheel.selectors_flywheel.cycles import application_list, cycle_list, last_full_week
from flywheel.selectors_flywheel.diagnosis import GoalStatus, diagnosis_get, goal_status_get
from flywheel.selectors_flywheel.levers import (
    applied_lever_slugs,
    goal_in_force,
    goal_spec,
    goal_targets,
    lever_spec,
    levers_in_force,
)
from flywheel.selectors_flywheel.scenarios import scenario_get
from flywheel.selectors_flywheel.shapes import (
    diagnosis_json,
    diagnosis_response,
    evidence_json,
    goal_check_json,
    projection_summary,
    proposal_json,
)

__all__ = [
    "GoalStatus",
    "application_list",
    "applied_lever_slugs",
    "baseline_get",
    "baseline_recall",
    "baseline_remember",
    "cycle_list",
    "diagnosis_get",
    "diagnosis_json",
    "diagnosis_response",
    "evidence_json",
    "goal_check_json",
    "goal_in_force",
    "goal_spec",
    "goal_status_get",
    "goal_targets",
    "last_full_week",
    "lever_spec",
    "levers_in_force",
    "projection_summary",
    "proposal_json",
    "scenario_get",
]
