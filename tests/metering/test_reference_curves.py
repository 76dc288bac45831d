"""Reference curves (kpis.md 6c, data-formats.md section 9): the import, the Pareto front,
R_ref at a TPOT SLO and the `total` basis conversion, by hand."""

from decimal import Decimal

import pytest

from metering.domain.factory import (
    CurveErrors,
    FrontPoint,
    front_of,
    pareto_front,
    points_from_csv,
    production_rate,
    r_ref_at,
)
from tests.metering.factories import make_deployment

HEADER = "model,gpu_type,tp,precision,concurrency,tok_s_per_gpu,tok_s_per_user,token_basis,isl,osl"
# Three front points and one the (40, 3000) point beats on both rates.
CSV = "\n".join(
    [
        HEADER,
        "llama-70b,H100,1,fp8,4,2000,60,output,1000,250",
        "llama-70b,H100,1,fp8,8,3000,40,output,1000,250",
        "llama-70b,H100,1,fp8,12,2800,35,output,1000,250",
        "llama-70b,H100,1,fp8,16,3500,20,output,1000,250",
    ]
)


def _front(text=CSV, w_in="0"):
    return front_of([point for _, point in points_from_csv(text)], w_in=Decimal(w_in))


def test_r_ref_is_linear_between_the_two_front_points_around_the_slo():
    # TPOT 20 ms = 50 tok/s per user, between (40, 3000) and (60, 2000):
    # 3000 + (50 - 40) / (60 - 40) x (2000 - 3000) = 2500.
    assert r_ref_at(_front(), slo_tpot_ms=20) == Decimal(2500)
    # On a point: 25 ms = 40 tok/s per user, its 3000; slower than the slowest: the top rate.
    assert r_ref_at(_front(), slo_tpot_ms=25) == Decimal(3000)
    assert r_ref_at(_front(), slo_tpot_ms=100) == Decimal(3500)


def test_a_dominated_point_is_not_on_the_front():
    front = [(f.per_user, f.per_gpu) for f in _front()]
    assert front == [(20, 3500), (40, 3000), (60, 2000)]  # (35, 2800) is beaten on both
    tied = pareto_front([FrontPoint(Decimal(40), Decimal(3000)), FrontPoint(Decimal(40), 2900)])
    assert tied == [FrontPoint(Decimal(40), Decimal(3000))]


def test_an_slo_beyond_the_fastest_user_rate_is_infeasible():
    assert r_ref_at(_front(), slo_tpot_ms=10) is None  # 100 tok/s per user > 60
    assert r_ref_at([], slo_tpot_ms=20) is None


def test_a_total_basis_converts_to_production_units_with_isl_osl():
    # isl 1000, osl 250, w_in 0.2: x (250 + 0.2 x 1000) / 1250 = x 0.36.
    rate = production_rate(
        Decimal(10000), token_basis="total", isl=1000, osl=250, w_in=Decimal("0.2")
    )
    assert rate == Decimal(3600)
    total = CSV.replace(",output,", ",total,")
    assert [(f.per_user, f.per_gpu) for f in _front(total, w_in="0.2")] == [
        (Decimal("7.2"), 1260), (Decimal("14.4"), 1080), (Decimal("21.6"), 720),
    ]  # fmt: skip
    assert production_rate(Decimal(5), token_basis="output", isl=9, osl=1, w_in=Decimal(1)) == 5


def test_a_refused_csv_names_the_line_and_the_column():
    text = (
        CSV.replace("fp8,8,3000,40,output", "fp8,8,3000,40,")
        + "\nllama-70b,H100,x,fp8,2,1,1,output,1,1"
    )
    with pytest.raises(CurveErrors) as refused:
        points_from_csv(text)
    assert refused.value.api_errors() == [
        {"line": 3, "field": "token_basis",
         "message": "required (output or total: whether the rates count input tokens)"},
        {"line": 6, "field": "tp", "message": "must be a whole number, not 'x'"},
    ]  # fmt: skip
    with pytest.raises(CurveErrors) as headless:
        points_from_csv(HEADER.replace(",token_basis", ""))
    assert headless.value.api_errors()[0] == {
        "line": 1, "field": "token_basis", "message": "the header has no token_basis column"
    }  # fmt: skip


def test_the_api_imports_csv_reads_r_ref_at_an_slo_and_refuses_all_or_nothing(
    users, token_client, admin_api, session_client
):
    make_deployment(tpot=20, aliases=("meta-llama/Llama-3.3-70B",))
    aliased = CSV.replace("llama-70b,H100,1,fp8,16", "meta-llama/Llama-3.3-70B,H100,1,fp8,16")
    posted = admin_api.post("/api/v1/reference-curves", aliased, content_type="text/csv")
    assert posted.status_code == 201, posted.content
    assert posted.json() == {"points": 4, "curves": 1}
    read = session_client(users["investor"]).get("/api/v1/reference-curves").json()["curves"]
    assert [(c["model"], c["r_ref"], c["infeasible"]) for c in read] == [
        ("llama-70b", "2500.00", False)
    ]
    assert read[0]["derivation"] == (
        "TPOT SLO 20 ms = 50 tok/s per user: between (40, 3,000) and (60, 2,000), linear: "
        "2,500 tok/s per GPU"
    )
    fast = admin_api.get("/api/v1/reference-curves?slo_tpot_ms=10").json()["curves"][0]
    assert (fast["r_ref"], fast["infeasible"]) == (None, True)
    unknown = admin_api.post(
        "/api/v1/reference-curves",
        [{**dict(zip(HEADER.split(","), CSV.splitlines()[1].split(","), strict=True)),
          "model": "nobody"}],
        format="json",
    )  # fmt: skip
    assert unknown.status_code == 400
    assert unknown.json()["errors"] == [
        {"index": 0, "field": "model", "message": "unknown model 'nobody'"}
    ]
    refused = token_client(users["finance"], scopes=["read"]).post(
        "/api/v1/reference-curves", CSV, content_type="text/csv"
    )
    assert refused.status_code == 403
    assert (
        admin_api.get("/api/v1/reference-curves").json()["curves"][0]["points"][0]["concurrency"]
        == 4
    )


def test_a_deployment_version_takes_its_r_ref_from_a_curve_with_the_derivation(admin_api):
    make_deployment(tpot=25)
    admin_api.post("/api/v1/reference-curves", CSV, content_type="text/csv")
    versions = "/api/v1/deployments/llama-70b@h100-a/versions"
    added = admin_api.post(
        versions,
        {"effective_from": "2027-01-01T00:00:00Z", "r_ref_from_curve": True, "slo_tpot_ms": 20},
        format="json",
    )
    assert added.status_code == 201, added.content
    assert added.json()["r_ref"] == "2500.0000"
    assert added.json()["r_ref_derivation"] == (
        "from the curve llama-70b/H100/tp1/fp8: TPOT SLO 20 ms = 50 tok/s per user: between "
        "(40, 3,000) and (60, 2,000), linear: 2,500 tok/s per GPU"
    )
    fast = admin_api.post(
        versions,
        {"effective_from": "2027-02-01T00:00:00Z", "r_ref_from_curve": True, "slo_tpot_ms": 10},
        format="json",
    )
    assert fast.json()["errors"][0]["field"] == "r_ref_from_curve"
    assert "infeasible" in fast.json()["errors"][0]["message"]
