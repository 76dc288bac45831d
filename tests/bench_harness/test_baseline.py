"""Goal 10's choice of setup (tests/bench/config.py): whether a baseline revision shares this
tree's migrations (the large dataset's database) or needs databases of its own, read from this
repository's history."""

from __future__ import annotations

import subprocess

import pytest

from tests.bench import config


@pytest.fixture
def last_migration(monkeypatch) -> str:
    """The last commit that changed a migration (the default baseline), with its parent."""
    monkeypatch.delenv("BENCH_BASELINE", raising=False)
    revision = config.baseline()
    parent = subprocess.run(
        ["git", "-C", str(config.ROOT), "rev-parse", "--verify", "--quiet", f"{revision}^"],
        capture_output=True,
    )
    if not revision or parent.returncode != 0:
        pytest.skip("needs the repository's history (not a shallow clone)")
    return revision


def test_the_default_baseline_shares_the_migrations_of_head(last_migration):
    assert not config.baseline_schema_differs(last_migration, "HEAD")
    assert not config.baseline_schema_differs(last_migration, last_migration)


def test_the_commit_before_a_migration_changed_differs(last_migration):
    assert config.baseline_schema_differs(f"{last_migration}^", last_migration)
    assert config.baseline_schema_differs(f"{last_migration}^", "HEAD")


def test_a_revision_git_does_not_know_stops_the_run(last_migration):
    with pytest.raises(SystemExit, match="BENCH_BASELINE: git cannot compare no-such-revision"):
        config.baseline_schema_differs("no-such-revision")


def test_the_arms_databases_are_their_own():
    names = set(config.BASELINE_DATABASES.values())
    assert len(names) == 2
    assert not names & {"bench_small", "bench_large"}
