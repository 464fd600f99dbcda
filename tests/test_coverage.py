"""The coverage experiment (issue 5): calibration of interval methods on simulated arenas."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from stablearena import InputError
from stablearena.cli import app
from stablearena.simulation.experiments.coverage import (
    CoverageConfig,
    arena_coverage,
    run_coverage,
    simulate_coverage_arena,
)


def test_arenas_are_reproducible_and_abilities_have_mean_one() -> None:
    cfg = CoverageConfig(n_models=8, n_battles=500, annotators=5)
    b1, t1, a1 = simulate_coverage_arena(cfg, 3)
    b2, t2, a2 = simulate_coverage_arena(cfg, 3)
    np.testing.assert_array_equal(t1, t2)
    np.testing.assert_array_equal(b1.outcome, b2.outcome)
    assert a1 is not None and a1.mean() == pytest.approx(1.0)
    assert not np.array_equal(simulate_coverage_arena(cfg, 4)[1], t1)
    assert set(np.unique(b1.outcome)) <= {0, 1}  # Bradley–Terry, no ties


def test_arena_coverage_counts_every_rating_and_difference() -> None:
    cfg = CoverageConfig(n_models=7, n_battles=1500, methods=("fisher", "bootstrap"), rounds=60)
    row = arena_coverage(cfg, 0)
    for method in ("fisher", "bootstrap"):
        assert len(row[method]["ratings"]) == 7
        assert len(row[method]["differences"]) == 21
        assert row[method]["rating_width"] > 0


def test_small_coverage_study_is_near_nominal_and_independent_of_workers() -> None:
    cfg = CoverageConfig(
        arenas=24,
        n_models=10,
        n_battles=2000,
        methods=("fisher", "sandwich", "bootstrap"),
        rounds=200,
    )
    one = run_coverage(cfg, workers=1)
    two = run_coverage(cfg, workers=2)
    assert [r["coverage"] for r in one["results"]] == [r["coverage"] for r in two["results"]]
    for r in one["results"]:
        # 24 arenas: loose bounds (the 200-arena acceptance is the slow test below)
        assert 0.88 <= r["coverage"] <= 0.99, r
        assert r["n_intervals"] == (240 if r["target"] == "ratings" else 24 * 45)
    json.dumps(one)


def test_intervals_that_are_too_narrow_are_caught() -> None:
    """Planted defect: at nominal level 0.5 the coverage must be near 0.5, not 0.95."""
    cfg = CoverageConfig(arenas=20, n_models=10, n_battles=2000, methods=("fisher",), level=0.5)
    res = run_coverage(cfg, workers=1)
    for r in res["results"]:
        assert 0.4 <= r["coverage"] <= 0.6


def test_bad_configurations_are_refused() -> None:
    with pytest.raises(InputError, match="interval methods"):
        run_coverage(CoverageConfig(methods=("jackknife",)))
    with pytest.raises(InputError, match="level"):
        run_coverage(CoverageConfig(level=1.5))
    with pytest.raises(InputError, match="ability_spread"):
        run_coverage(CoverageConfig(annotators=3, ability_spread=1.5))
    with pytest.raises(InputError, match="arenas"):
        run_coverage(CoverageConfig(arenas=0))


def test_cli_experiment_coverage_json() -> None:
    res = CliRunner().invoke(
        app,
        [
            "experiment",
            "coverage",
            "--arenas",
            "4",
            "--models",
            "6",
            "--battles",
            "800",
            "--ci",
            "fisher,sandwich",
            "--workers",
            "1",
            "--format",
            "json",
        ],
    )
    assert res.exit_code == 0, res.output
    payload = json.loads(res.stdout)
    assert payload["experiment"] == "coverage"
    assert {(r["method"], r["target"]) for r in payload["results"]} == {
        ("fisher", "ratings"),
        ("fisher", "differences"),
        ("sandwich", "ratings"),
        ("sandwich", "differences"),
    }


# ------------------------------------------------------------------------------- acceptance
@pytest.mark.slow
@pytest.mark.parametrize(
    "rater,annotators,methods",
    [("m-elo", 0, ("fisher", "sandwich", "bootstrap")), ("am-elo", 20, ("fisher", "sandwich"))],
)
def test_acceptance_coverage_of_95_percent_intervals(rater: str, annotators: int, methods) -> None:
    """Issue 5: 200 arenas of 30 models × 5,000 battles simulated from the model itself; every
    method's 95% intervals (ratings, mean-zero, and differences) cover 0.93–0.97 of the time."""
    cfg = CoverageConfig(
        arenas=200, rater=rater, annotators=annotators, methods=methods, rounds=1000
    )
    res = run_coverage(cfg)
    for r in res["results"]:
        assert 0.93 <= r["coverage"] <= 0.97, r
