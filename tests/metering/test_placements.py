"""Which deployment a model name and pool place an event or a metric on: one rule, one read."""

import pytest

from metering.models import Deployment
from metering.selectors.factory import placements_read
from tests.metering.factories import make_deployment

pytestmark = pytest.mark.both_backends


@pytest.fixture
def factory(db):
    """llama-70b on two pools (alias meta-llama/Llama-3.3-70B-Instruct), qwen on one, and
    mistral served nowhere; `gpt-4o-mini` is an alias of qwen."""
    make_deployment(model="llama-70b", pool="h100-a", aliases=["meta-llama/Llama-3.3-70B-Instruct"])
    make_deployment(model="llama-70b", pool="h200-a")
    make_deployment(model="qwen-32b", pool="h100-a", aliases=["gpt-4o-mini"])
    make_deployment(model="mistral-7b", pool="h100-a")
    Deployment.objects.filter(slug="mistral-7b@h100-a").delete()


def _slug(placed):
    return None if placed is None else Deployment.objects.get(pk=placed.id).slug


def test_names_and_aliases_are_placed_by_pool_or_on_the_only_deployment(
    factory, django_assert_num_queries
):
    names = {"llama-70b", "meta-llama/Llama-3.3-70B-Instruct", "qwen-32b", "gpt-4o-mini",
             "mistral-7b", "gpt-9"}  # fmt: skip
    with django_assert_num_queries(1):
        known = placements_read(names=names)
    assert (
        _slug(known.place("meta-llama/Llama-3.3-70B-Instruct", "h200-a")[0]) == "llama-70b@h200-a"
    )
    assert _slug(known.place("llama-70b", "h100-a")[0]) == "llama-70b@h100-a"
    assert _slug(known.place("gpt-4o-mini", None)[0]) == "qwen-32b@h100-a"
    qwen = known.place("qwen-32b", None)[0]
    assert qwen is not None and qwen.slug == "qwen-32b@h100-a"
    assert known.place("llama-70b", None) == (
        None,
        ("pool", "model 'llama-70b' runs on several pools (h100-a, h200-a); give pool"),
    )
    assert known.place("qwen-32b", "h200-a") == (
        None,
        ("pool", "model 'qwen-32b' has no deployment on pool 'h200-a'"),
    )
    assert known.place("mistral-7b", None) == (
        None,
        ("model", "model 'mistral-7b' is not deployed on any pool"),
    )
    assert known.place("gpt-9", None) == (None, ("model", "unknown model 'gpt-9'"))
    assert set(known.model_ids) == names - {"gpt-9"}


def test_an_alias_wins_over_another_models_slug(factory):
    make_deployment(model="gpt-4o-mini", pool="h200-a")  # a model whose slug is qwen's alias
    known = placements_read(names={"gpt-4o-mini"})
    assert _slug(known.place("gpt-4o-mini", None)[0]) == "qwen-32b@h100-a"


def test_no_name_reads_nothing(db, django_assert_num_queries):
    with django_assert_num_queries(0):
        known = placements_read(names=set())
    assert known.place("llama-70b", None) == (None, ("model", "unknown model 'llama-70b'"))
