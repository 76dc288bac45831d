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
First, the models placed as if alone (no shared room): when those placements fit the pools
together, no coupling binds and they are the optimum (the usual case, a fraction of a
second for 50 models × 20 pools). A step cut short by its time keeps HiGHS' best and the
proven gap (docs/performance.md, goal 25). Pure: no Django. Rates are floats here (HiGHS solves in floats); money stays Decimal.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

# scipy.optimize is imported where a placement is solved: importing it takes about 0.8 s of
# CPU, which every process that loads the URLs (the web server, each worker, each command)
# would otherwise spend at start, planning or not.

DEFAULT_TARGET_BUSY = Decimal("0.8")
NO_LIMIT = 1_000_000  # GPUs a pool may add when purchases are allowed
TOLERANCE = 1e-6  # tok/s and money: what the solver's floats may miss by
TIME_LIMIT = 2.0  # seconds a step of the whole program may take (HiGHS keeps its best)


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
    gap: float = 0.0  # HiGHS' proven relative gap: 0 when the placement is optimal

    def pool_gpus(self, pool: str) -> int:
        return sum(n for (_, p), n in self.gpus.items() if p == pool)


class SolverFailed(RuntimeError):
    """HiGHS ended without a placement (its time ran out before it found one, or a
    numerical failure)."""


def place(
    *,
    demand: Mapping[str, Decimal],
    pools: Sequence[PoolRoom],
    rates: Sequence[Rate],
    target_busy: Decimal = DEFAULT_TARGET_BUSY,
    allow_purchase: bool = False,
    time_limit: float = TIME_LIMIT,
) -> Placement:
    """The optimal placement of each model's peak demand (tok/s) on the pools (module doc).
    A model without a rate on any pool is unserved whole. The models are first placed each
    as if alone (one program of them side by side, without the pools' shared room); when
    those placements fit the pools together they are the optimum of the whole. Otherwise
    the whole program is solved, each step within `time_limit` seconds: HiGHS' best within
    it, its proven gap kept in `gap`."""
    by_slug = {pool.slug: pool for pool in pools}
    cells = [r for r in rates if r.pool in by_slug and r.model in demand and r.r_ref > 0]
    busy = float(target_busy)
    if not cells:  # nothing to place on: every demand unserved
        return Placement(
            unserved={m: Decimal(demand[m]) for m in sorted(demand) if demand[m] > 0},
            capacity=dict.fromkeys(sorted(demand), Decimal(0)),
        )
    alone = _each_alone(demand, cells, by_slug, busy, time_limit)
    if alone is not None:
        return alone
    from scipy.optimize import Bounds, LinearConstraint

    models = sorted(demand)
    slugs = [pool.slug for pool in pools]
    n_y, n_a, n_u = len(cells), len(slugs), len(models)
    n = n_y + n_a + n_u
    model_row = {k: i for i, k in enumerate(models)}
    pool_row = {p: i for i, p in enumerate(slugs)}

    demand_rows = np.zeros((n_u, n))
    capacity_rows = np.zeros((n_a, n))
    peaks = np.array([float(demand[k]) for k in models])
    scale = np.where(peaks > 0, peaks, 1.0)  # each demand row in shares of its peak
    for j, cell in enumerate(cells):
        row = model_row[cell.model]
        demand_rows[row, j] = cell.tp * float(cell.r_ref) * busy / scale[row]
        capacity_rows[pool_row[cell.pool], j] = cell.tp
    for i in range(n_a):
        capacity_rows[i, n_y + i] = -1
    for i in range(n_u):
        demand_rows[i, n_y + n_a + i] = 1 / scale[i]
    installed = np.array([float(by_slug[p].installed) for p in slugs])
    constraints = [
        LinearConstraint(demand_rows, lb=peaks / scale, ub=np.inf),
        LinearConstraint(capacity_rows, lb=-np.inf, ub=installed),
    ]
    upper = np.concatenate(
        [
            [_replicas_alone(float(demand[c.model]), c, busy) for c in cells],
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
    hour_cost = np.concatenate([_hour_costs(cells, by_slug), np.zeros(n_a + n_u)])
    steps = [unserved_cost, capex_cost, hour_cost] if allow_purchase else [unserved_cost, hour_cost]
    solution, gap = np.zeros(n), 0.0
    for objective in steps:
        solution, step_gap = _solve(objective, constraints, integrality, bounds, time_limit)
        gap = max(gap, step_gap)
        best = float(objective @ solution)
        constraints.append(
            LinearConstraint(objective, lb=-np.inf, ub=best + TOLERANCE * max(1.0, abs(best)))
        )
    placement = _placement(solution, cells, slugs, models, by_slug, peaks, busy)
    placement.gap = gap
    return placement


def _replicas_alone(peak: float, cell: Rate, busy: float) -> int:
    """The replicas of a cell that serve the model's peak alone: more are never needed."""
    return math.ceil(peak / (cell.tp * float(cell.r_ref) * busy) - TOLERANCE)


def _hour_costs(cells: Sequence[Rate], by_slug: Mapping[str, PoolRoom]) -> list[float]:
    return [cell.tp * float(by_slug[cell.pool].cost_per_gpu_hour) for cell in cells]


def _each_alone(demand, cells, by_slug, busy, time_limit) -> Placement | None:
    """Each model placed alone on the pools' installed GPUs at the least cost per hour, if
    every model is served so and the placements fit the pools together (then no coupling
    binds and this is the whole program's optimum); None otherwise, and at once when each
    model's cheapest pool per tok/s alone would not hold them (coupling is likely)."""
    cheapest: dict[str, tuple[float, Rate]] = {}
    for c in cells:
        per_tok = float(by_slug[c.pool].cost_per_gpu_hour) / float(c.r_ref)
        if c.model not in cheapest or per_tok < cheapest[c.model][0]:
            cheapest[c.model] = (per_tok, c)
    wanted: dict[str, int] = {}
    for model, (_, c) in cheapest.items():
        wanted[c.pool] = wanted.get(c.pool, 0) + c.tp * _replicas_alone(
            float(demand[model]), c, busy
        )
    if any(n > by_slug[p].installed for p, n in wanted.items()):
        return None
    models = sorted(demand)
    if any(model not in cheapest for model in models):
        return None
    row = {model: i for i, model in enumerate(models)}
    supply = np.zeros((len(models), len(cells)))
    upper = np.zeros(len(cells))
    for j, c in enumerate(cells):
        peak = float(demand[c.model])
        supply[row[c.model], j] = c.tp * float(c.r_ref) * busy / (peak or 1.0)
        upper[j] = min(_replicas_alone(peak, c, busy), by_slug[c.pool].installed // c.tp)
    shares = np.array([1.0 if float(demand[m]) > 0 else 0.0 for m in models])
    if np.any(supply @ upper < shares - TOLERANCE):
        return None
    from scipy.optimize import Bounds, LinearConstraint

    # The models' programs side by side in one: without the pools' room they do not meet.
    solution, gap = _solve(
        np.array(_hour_costs(cells, by_slug)),
        [LinearConstraint(supply, lb=shares, ub=np.inf)],
        np.ones(len(cells)),
        Bounds(np.zeros(len(cells)), upper),
        time_limit,
    )
    if gap > 0:
        return None
    used: dict[str, float] = {}
    for j, cell in enumerate(cells):
        used[cell.pool] = used.get(cell.pool, 0) + solution[j] * cell.tp
    if any(used[p] > by_slug[p].installed + TOLERANCE for p in used):
        return None
    slugs = list(by_slug)
    full = np.concatenate([solution, np.zeros(len(slugs) + len(models))])
    peaks = np.array([float(demand[k]) for k in models])
    return _placement(full, cells, slugs, models, by_slug, peaks, busy)


def _solve(objective, constraints, integrality, bounds, time_limit) -> tuple[np.ndarray, float]:
    """HiGHS' solution and its proven relative gap (0: optimal)."""
    from scipy.optimize import milp

    result = milp(
        c=objective,
        constraints=constraints,
        integrality=integrality,
        bounds=bounds,
        options={"mip_rel_gap": 1e-9, "time_limit": time_limit},
    )
    if result.x is None:
        raise SolverFailed(f"the placement was not solved: {result.message}")
    gap = 0.0 if result.status == 0 else float(getattr(result, "mip_gap", 1.0) or 0.0)
    return result.x, gap


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
