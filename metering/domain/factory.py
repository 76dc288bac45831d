"""Reference curves (kpis.md 6c, data-formats.md section 9): a model's measured throughput
per GPU against its interactivity (tok/s per user) on a GPU type, tensor parallel degree and
precision, as InferenceX-style benchmark exports give it.

Only the Pareto front counts (a point another matches or beats on both rates, and beats on
one, is dominated). A point's rates are on its `token_basis`: `output` rates are production
already; `total` (input + output) rates convert to production units as
tok/s × (osl + w_in × isl) / (isl + osl). R_ref at a TPOT SLO is the front's tok/s per GPU at
tok/s per user = 1000 / slo_tpot_ms, linear between its two neighbours; beyond the front's
fastest user rate the SLO cannot be met on that GPU (`infeasible`, None). Pure: no Django.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from itertools import pairwise

from portal.errors import FieldError

OUTPUT = "output"
TOTAL = "total"
TOKEN_BASES = (OUTPUT, TOTAL)
REQUIRED = (
    "model", "gpu_type", "tp", "precision", "concurrency", "tok_s_per_gpu", "tok_s_per_user",
    "token_basis", "isl", "osl",
)  # fmt: skip
OPTIONAL = ("ttft_p50_ms", "source")
INTEGERS = ("tp", "concurrency", "isl", "osl")
RATES = ("tok_s_per_gpu", "tok_s_per_user")
MAX_RATE = Decimal("1e9")  # tok/s: no GPU and no user is anywhere near
MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class CurvePoint:
    """One measured point of a curve, as imported (rates on its `token_basis`)."""

    model: str
    gpu_type: str
    tp: int
    precision: str
    concurrency: int
    tok_s_per_gpu: Decimal
    tok_s_per_user: Decimal
    token_basis: str
    isl: int
    osl: int
    ttft_p50_ms: Decimal | None = None
    source: str = ""

    @property
    def curve(self) -> tuple[str, str, int, str]:
        """The curve it belongs to: (model, GPU type, tp, precision)."""
        return (self.model, self.gpu_type, self.tp, self.precision)


@dataclass(frozen=True)
class FrontPoint:
    """A point of a curve's front in production units: tok/s per user, tok/s per GPU."""

    per_user: Decimal
    per_gpu: Decimal


class CurveErrors(FieldError):
    """A refused import: every record's errors, each naming its line (CSV, the header is
    line 1) or index (JSON) and its column. Nothing of the import is stored."""

    def __init__(self, errors: list[dict]) -> None:
        first = errors[0]
        super().__init__(first["field"], first["message"])
        self.errors = errors

    def api_errors(self) -> list[dict]:
        return self.errors


Located = tuple[dict[str, int], CurvePoint]  # where a point was read ({"line": n} or {"index": i})


def points_from_csv(text: str) -> list[Located]:
    """The points of a CSV export (header names in any order, extra columns ignored), each
    with its line. CurveErrors naming each refused line and column (the header is line 1)."""
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip() for name in reader.fieldnames or []]
    missing = [name for name in REQUIRED if name not in header]
    if missing:
        raise CurveErrors(
            [
                {"line": 1, "field": name, "message": f"the header has no {name} column"}
                for name in missing
            ]
        )
    reader.fieldnames = header
    records = [(reader.line_num, row) for row in reader]
    return _points(records, key="line")


def points_from_json(items: object) -> list[Located]:
    """The points of a JSON array of objects, each with its index; CurveErrors naming each
    refused index and field."""
    if not isinstance(items, list) or not items:
        raise CurveErrors([{"field": "", "message": "send a non-empty array of curve points"}])
    records = []
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise CurveErrors([{"index": index, "field": "", "message": "must be an object"}])
        records.append((index, {k: "" if v is None else str(v) for k, v in item.items()}))
    return _points(records, key="index")


def _points(records: Iterable[tuple[int, Mapping[str, str]]], *, key: str) -> list[Located]:
    points: list[Located] = []
    errors: list[dict] = []
    for where, record in records:
        point, refused = point_check(record)
        errors += [{key: where, "field": field, "message": message} for field, message in refused]
        if point is not None:
            points.append(({key: where}, point))
    if errors:
        raise CurveErrors(errors)
    if not points:
        raise CurveErrors([{"field": "", "message": "no curve point in the body"}])
    return points


def point_check(record: Mapping[str, str]) -> tuple[CurvePoint | None, list[tuple[str, str]]]:
    """A record's point, or the (column, message) of each value refused. A point without
    `token_basis` is refused naming it: benchmarks disagree on whether throughput counts
    input tokens (data-formats.md section 9)."""
    values = {name: (record.get(name) or "").strip() for name in (*REQUIRED, *OPTIONAL)}
    errors: list[tuple[str, str]] = []
    for name in REQUIRED:
        if not values[name]:
            hint = " (output or total: whether the rates count input tokens)"
            errors.append((name, "required" + (hint if name == "token_basis" else "")))
    if values["token_basis"] and values["token_basis"] not in TOKEN_BASES:
        errors.append(("token_basis", f"must be output or total, not {values['token_basis']!r}"))
    numbers: dict[str, object] = {}
    for name in INTEGERS:
        if values[name]:
            try:
                numbers[name] = int(values[name])
            except ValueError:
                errors.append((name, f"must be a whole number, not {values[name]!r}"))
                continue
            lowest = 0 if name == "isl" else 1
            if not lowest <= numbers[name] <= MAX_INT:  # type: ignore[operator]
                errors.append((name, f"must be at least {lowest}"))
    for name in (*RATES, "ttft_p50_ms"):
        if values[name]:
            try:
                number = Decimal(values[name])
            except InvalidOperation:
                errors.append((name, f"must be a number, not {values[name]!r}"))
                continue
            if not number.is_finite() or not 0 < number < MAX_RATE:
                errors.append((name, "must be a positive number"))
            numbers[name] = number
    if errors:
        return None, errors
    return (
        CurvePoint(
            model=values["model"],
            gpu_type=values["gpu_type"],
            tp=numbers["tp"],  # type: ignore[arg-type]
            precision=values["precision"],
            concurrency=numbers["concurrency"],  # type: ignore[arg-type]
            tok_s_per_gpu=numbers["tok_s_per_gpu"],  # type: ignore[arg-type]
            tok_s_per_user=numbers["tok_s_per_user"],  # type: ignore[arg-type]
            token_basis=values["token_basis"],
            isl=numbers["isl"],  # type: ignore[arg-type]
            osl=numbers["osl"],  # type: ignore[arg-type]
            ttft_p50_ms=numbers.get("ttft_p50_ms"),  # type: ignore[arg-type]
            source=values["source"],
        ),
        [],
    )


def production_rate(
    rate: Decimal, *, token_basis: str, isl: int, osl: int, w_in: Decimal
) -> Decimal:
    """A rate in production units (output-token units, kpis.md section 1): an `output` rate
    as it is, a `total` one × (osl + w_in × isl) / (isl + osl)."""
    if token_basis == OUTPUT:
        return rate
    return rate * (osl + w_in * isl) / (isl + osl)


def front_of(points: Sequence[CurvePoint], *, w_in: Decimal) -> list[FrontPoint]:
    """The Pareto front of a curve's points in production units, by tok/s per user rising
    (so tok/s per GPU falling)."""
    pairs = [
        FrontPoint(
            per_user=production_rate(
                p.tok_s_per_user, token_basis=p.token_basis, isl=p.isl, osl=p.osl, w_in=w_in
            ),
            per_gpu=production_rate(
                p.tok_s_per_gpu, token_basis=p.token_basis, isl=p.isl, osl=p.osl, w_in=w_in
            ),
        )
        for p in points
    ]
    return pareto_front(pairs)


def pareto_front(pairs: Iterable[FrontPoint]) -> list[FrontPoint]:
    """The points no other matches or beats on both rates while beating on one, by tok/s
    per user rising."""
    front: list[FrontPoint] = []
    best: Decimal | None = None
    for pair in sorted(pairs, key=lambda p: (p.per_user, p.per_gpu), reverse=True):
        if best is None or pair.per_gpu > best:
            front.append(pair)
            best = pair.per_gpu
    return front[::-1]


def user_rate_at(slo_tpot_ms: int) -> Decimal:
    """The tok/s per user a TPOT SLO asks for: 1000 / slo_tpot_ms."""
    return Decimal(1000) / Decimal(slo_tpot_ms)


def r_ref_at(front: Sequence[FrontPoint], *, slo_tpot_ms: int) -> Decimal | None:
    """The front's tok/s per GPU at the SLO's tok/s per user, linear between its two
    neighbours; the front's highest throughput for an SLO slower than its slowest point;
    None (`infeasible`) beyond its fastest user rate or without a front."""
    if not front:
        return None
    wanted = user_rate_at(slo_tpot_ms)
    if wanted > front[-1].per_user:
        return None
    if wanted <= front[0].per_user:
        return front[0].per_gpu
    for low, high in pairwise(front):
        if low.per_user <= wanted <= high.per_user:
            share = (wanted - low.per_user) / (high.per_user - low.per_user)
            return low.per_gpu + share * (high.per_gpu - low.per_gpu)
    return None  # unreachable: the front is sorted and spans `wanted`


def derivation(front: Sequence[FrontPoint], *, slo_tpot_ms: int, r_ref: Decimal | None) -> str:
    """How R_ref was read off the front, in words (kept beside a version that takes it)."""
    wanted = user_rate_at(slo_tpot_ms)
    head = f"TPOT SLO {slo_tpot_ms} ms = {_n(wanted)} tok/s per user"
    if r_ref is None:
        fastest = _n(front[-1].per_user) if front else "none"
        return f"{head}: infeasible, the front's fastest is {fastest} tok/s per user"
    if wanted <= front[0].per_user:
        return f"{head}: at or below the front's slowest point, its {_n(r_ref)} tok/s per GPU"
    for low, high in pairwise(front):
        if low.per_user <= wanted <= high.per_user:
            return (
                f"{head}: between ({_n(low.per_user)}, {_n(low.per_gpu)}) and "
                f"({_n(high.per_user)}, {_n(high.per_gpu)}), linear: {_n(r_ref)} tok/s per GPU"
            )
    return f"{head}: {_n(r_ref)} tok/s per GPU"


def _n(value: Decimal) -> str:
    """A rate as written in a derivation: two decimals at most, no trailing zeros."""
    text = f"{value.quantize(Decimal('0.01')):,}"
    return text.rstrip("0").rstrip(".") if "." in text else text
