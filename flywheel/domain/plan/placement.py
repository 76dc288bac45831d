"""Placement (kpis.md 6c): how many GPUs of which pool serve each model's peak demand, solved
exactly as a mixed-integer program by scipy's `milp` (HiGHS). Greedy by cost per token is
not optimal once GPUs are whole: in the worked example it takes 4 H200 at 14.00 an hour
where 2 H200 + 2 H100 serve the same 10,000 tok/s for 12.00.

Variables: y(k, p) whole replicas of model k on pool p (x = tp × y GPUs), a(p) GPUs added to
pool p, u(k) the tok/s of model k left unserved. Constraints:
  Σ_p tp × y(k,p) × R_ref(k,p) × target_busy + u(k) ≥ peak(k)        for every model
  Σ_k tp × y(k,p) − a(p) ≤ installed(p)                               for every pool
Solved lexicographically, each step keeping the optimum of the ones before:
  1. the least demand unserved (a = 0 unless purchases are allowed);
  2. with purchases, the least capex added (GPUs are added where capex buys capacity
     cheapest);
  3. the least cost per hour, Σ x(k,p) × cost per GPU-hour(p).
Pure: no Django. Rates are floats here (HiGHS solves in floats); money stays Decimal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

DEFAULT_TARGET_BUSY = Decimal("0.8")
NO_LIMIT = 1_000_000  # GPUs a pool may add when purchases are allowed
TOLERANCE = 1e-6  # tok/s and money: what the solver's floats may miss by


@dataclass(frozen=True)
class PoolRoom:
    """A pool as placement sees it: GPUs installed, what a GPU-hour costs at `target_busy`,
    what a GPU costs to buy, and whether it may grow."""

    slug: str
    gpu_type: str
    installed: int
    cost_per_gpu_hour: Decimal
    capex_per_gpu: Decimal
    can_add: bool = True


@dataclass(frozen=True)
class Rate:
    """What one GPU of a pool produces for a model at its SLO (R_ref, production tok/s) and
    the tensor parallel degree a replica takes (GPUs come in multiples of it)."""

    model: str
    pool: str
    r_ref: Decimal
    tp: int = 1


@dataclass
class Placement:
    """The solution: GPUs per (model, pool), GPUs added per pool, tok/s unserved per model,
    the capacity placed per model (tok/s at target_busy) and the cost per hour."""

    gpus: dict[tuple[str, str], int] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)
    unserved: dict[str, Decimal] = field(default_factory=dict)
    capacity: dict[str, Decimal] = field(default_factory=dict)
    cost_per_hour: Decimal = Decimal(0)

    def pool_gpus(self, pool: str) -> int:
        return sum(n for (_, p), n in self.gpus.items() if p == pool)


class SolverFailed(RuntimeError):
    """HiGHS ended without an optimum (a time limit, or a numerical failure)."""


def place(
    *,
    demand: Mapping[str, Decimal],
    pools: Sequence[PoolRoom],
    rates: Sequence[Rate],
    target_busy: Decimal = DEFAULT_TARGET_BUSY,
    allow_purchase: bool = False,
) -> Placement:
    """The optimal placement of each model's peak demand (tok/s) on the pools (module doc).
    A model without a rate on any pool is unserved whole."""
    by_slug = {pool.slug: pool for pool in pools}
    cells = [r for r in rates if r.pool in by_slug and r.model in demand and r.r_ref > 0]
    models = sorted(demand)
    slugs = [pool.slug for pool in pools]
    n_y, n_a, n_u = len(cells), len(slugs), len(models)
    n = n_y + n_a + n_u
    model_row = {k: i for i, k in enumerate(models)}
    pool_row = {p: i for i, p in enumerate(slugs)}
    busy = float(target_busy)

    demand_rows = np.zeros((n_u, n))
    capacity_rows = np.zeros((n_a, n))
    for j, cell in enumerate(cells):
        demand_rows[model_row[cell.model], j] = cell.tp * float(cell.r_ref) * busy
        capacity_rows[pool_row[cell.pool], j] = cell.tp
    for i in range(n_a):
        capacity_rows[i, n_y + i] = -1
    for i in range(n_u):
        demand_rows[i, n_y + n_a + i] = 1
    peaks = np.array([float(demand[k]) for k in models])
    installed = np.array([float(by_slug[p].installed) for p in slugs])
    constraints = [
        LinearConstraint(demand_rows, lb=peaks, ub=np.inf),
        LinearConstraint(capacity_rows, lb=-np.inf, ub=installed),
    ]
    upper = np.concatenate(
        [
            np.full(n_y, np.inf),
            [NO_LIMIT if allow_purchase and by_slug[p].can_add else 0 for p in slugs],
            peaks,
        ]
    )
    bounds = Bounds(np.zeros(n), upper)
    integrality = np.concatenate([np.ones(n_y + n_a), np.zeros(n_u)])

    unserved_cost = np.concatenate([np.zeros(n_y + n_a), np.ones(n_u)])
    capex_cost = np.concatenate(
        [np.zeros(n_y), [float(by_slug[p].capex_per_gpu) for p in slugs], np.zeros(n_u)]
    )
    hour_cost = np.concatenate(
        [
            [cell.tp * float(by_slug[cell.pool].cost_per_gpu_hour) for cell in cells],
            np.zeros(n_a + n_u),
        ]
    )
    steps = [unserved_cost, capex_cost, hour_cost] if allow_purchase else [unserved_cost, hour_cost]
    solution = np.zeros(n)
    for objective in steps:
        solution = _solve(objective, constraints, integrality, bounds)
        best = float(objective @ solution)
        constraints.append(
            LinearConstraint(objective, lb=-np.inf, ub=best + TOLERANCE * max(1.0, abs(best)))
        )
    return _placement(solution, cells, slugs, models, by_slug, peaks, busy)


def _solve(objective, constraints, integrality, bounds) -> np.ndarray:
    result = milp(
        c=objective,
        constraints=constraints,
        integrality=integrality,
        bounds=bounds,
        options={"mip_rel_gap": 1e-9, "time_limit": 60},
    )
    if result.status != 0 or result.x is None:
        raise SolverFailed(f"the placement was not solved: {result.message}")
    return result.x


def _placement(solution, cells, slugs, models, by_slug, peaks, busy) -> Placement:
    n_y = len(cells)
    placement = Placement()
    capacity = dict.fromkeys(models, 0.0)
    cost = Decimal(0)
    for j, cell in enumerate(cells):
        replicas = round(solution[j])
        if replicas:
            gpus = replicas * cell.tp
            placement.gpus[(cell.model, cell.pool)] = gpus
            capacity[cell.model] += gpus * float(cell.r_ref) * busy
            cost += gpus * by_slug[cell.pool].cost_per_gpu_hour
    for i, slug in enumerate(slugs):
        added = round(solution[n_y + i])
        if added:
            placement.added[slug] = added
    for i, model in enumerate(models):
        short = peaks[i] - capacity[model]
        if short > TOLERANCE:
            placement.unserved[model] = Decimal(repr(round(float(short), 3)))
        placement.capacity[model] = Decimal(repr(round(float(capacity[model]), 3)))
    placement.cost_per_hour = cost
    return placement
