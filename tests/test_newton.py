"""The shared Newton driver (stablearena.raters._newton): every model family's fit is what it
was before the families shared it.

``tests/data/newton_reference.json`` holds ratings, abilities, log-likelihoods and convergence
reports recorded with the code before the change (main at 102f296 — except the am-ELO fixtures
with inverted annotators, recorded at ed8c277, the commit that changed their identification;
see ``python tests/test_newton.py --help``). Each fit must reproduce them to 1e-10 and keep its
convergence report's fields.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

REFERENCE = Path(__file__).resolve().parent / "data" / "newton_reference.json"


# ------------------------------------------------------------------------------ the fixtures
def _simulated(m: int, n: int, seed: int, **kw: Any):
    from stablearena.data.simulate import random_ratings, simulate_battles

    return simulate_battles(random_ratings(m, seed=seed), n, seed=seed, **kw)


def _undefeated():
    """A log in which model_000 never loses: m-ELO needs its existence prior."""
    b = _simulated(8, 1500, 11)
    keep = ~(((b.model_a == 0) & (b.outcome == 1)) | ((b.model_b == 0) & (b.outcome == 0)))
    return b.take(keep)


def _without_some_ties():
    """Pair counts where six pairs have no ties: their Rao–Kupper thresholds sit on the kink 0."""
    from stablearena.data.battles import as_counts

    counts = as_counts(_simulated(8, 2500, 13, rule="rao-kupper", eta=0.4))
    ties = counts.ties.copy()
    ties[:6] = 0
    return counts.with_counts(counts.wins, counts.losses, ties)


def fixtures() -> dict[str, Any]:
    """name → a function returning the fitted result (deterministic)."""
    from stablearena.data.simulate import random_ratings
    from stablearena.data.style_features import simulate_style_battles
    from stablearena.raters.annotator import AmElo
    from stablearena.raters.bradley_terry import BradleyTerry, MElo
    from stablearena.raters.style import StyleAmElo, StyleBradleyTerry, StyleMElo
    from stablearena.raters.ties import Davidson, RaoKupper, ThurstonianBT
    from stablearena.simulation.perturbation import simulate_arena

    def style(seed: int, abilities=None):
        return simulate_style_battles(
            random_ratings(8, seed=seed),
            3000,
            gamma=(0.3, 0.1),
            abilities=abilities,
            seed=seed,
            ties=True,
        )

    return {
        "m-elo": lambda: MElo().fit(_simulated(12, 3000, 1)),
        "bt": lambda: BradleyTerry().fit(_simulated(10, 2000, 2)),
        "m-elo-prior": lambda: MElo().fit(_undefeated()),
        "am-elo-honest": lambda: AmElo().fit(
            simulate_arena(10, 4000, profiles={"honest": 6}, seed=3).battles
        ),
        "am-elo-model-prior": lambda: AmElo().fit(
            simulate_arena(3, 180, profiles={"honest": 3}, seed=500).battles
        ),
        "am-elo-flippers": lambda: AmElo().fit(
            simulate_arena(10, 4000, profiles={"honest": 8, "flipper": 2}, seed=4).battles
        ),
        "am-elo-flippers-min-records": lambda: AmElo(min_records=150).fit(
            simulate_arena(
                12, 5000, profiles={"honest": 20, "flipper": 5, "always_a": 2}, seed=5
            ).battles
        ),
        "rao-kupper": lambda: RaoKupper().fit(_simulated(8, 3000, 6, rule="rao-kupper", eta=0.5)),
        "davidson": lambda: Davidson().fit(_simulated(8, 3000, 7, rule="davidson", eta=0.3)),
        "rao-kupper-k-tie": lambda: RaoKupper(k_tie=2).fit(
            _simulated(8, 3000, 8, rule="rao-kupper", eta=0.5)
        ),
        "rao-kupper-kinks": lambda: RaoKupper(k_tie=6).fit(_without_some_ties()),
        "bt-cov": lambda: ThurstonianBT(k_cov=2).fit(
            _simulated(8, 3000, 12, rule="davidson", eta=0.2)
        ),
        "style-m-elo": lambda: StyleMElo().fit(style(9)),
        "style-bt": lambda: StyleBradleyTerry().fit(style(10)),
        "style-am-elo": lambda: StyleAmElo().fit(style(11, abilities=np.array([1.0, 0.5, 1.5]))),
    }


#: fixtures whose reference comes from the commit that changed am-ELO's identification
AFTER_IDENTIFICATION = ("am-elo-flippers", "am-elo-flippers-min-records")


def summary(fitted: Any) -> dict[str, Any]:
    """What must not change: scores, ratings, abilities, log-likelihood, convergence report."""
    out: dict[str, Any] = {
        "scores": np.asarray(fitted.scores, dtype=float).tolist(),
        "ratings": np.asarray(fitted.ratings, dtype=float).tolist(),
        "loglik": float(fitted.loglik),
        "convergence": {
            "converged": bool(fitted.convergence.converged),
            "iterations": int(fitted.convergence.iterations),
            "grad_norm": float(fitted.convergence.grad_norm),
            "solver": fitted.convergence.solver,
            "message": fitted.convergence.message,
        },
    }
    for name in ("abilities", "gamma"):
        if getattr(fitted, name, None) is not None:
            out[name] = np.asarray(getattr(fitted, name), dtype=float).tolist()
    return out


def compute(names: list[str] | None = None) -> dict[str, Any]:
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fit in fixtures().items():
            if names is None or name in names:
                out[name] = summary(fit())
    return out


# ------------------------------------------------------------------------------ the tests
@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return json.loads(REFERENCE.read_text())


@pytest.mark.parametrize("name", list(fixtures()))
def test_results_are_unchanged(name, reference):
    ref = reference[name]
    now = compute([name])[name]
    for key in ("scores", "ratings", "abilities", "gamma"):
        assert (key in ref) == (key in now), key
        if key in ref:
            scale = 1000.0 if key == "ratings" else 1.0  # ratings are in Elo points
            np.testing.assert_allclose(now[key], ref[key], rtol=0, atol=1e-10 * scale, err_msg=key)
    np.testing.assert_allclose(now["loglik"], ref["loglik"], rtol=1e-10)
    conv, ref_conv = now["convergence"], ref["convergence"]
    assert set(conv) == set(ref_conv)
    assert conv["converged"] == ref_conv["converged"]
    assert conv["solver"] == ref_conv["solver"]
    assert conv["converged"]
    assert conv["grad_norm"] <= 1e-9


if __name__ == "__main__":  # pragma: no cover - records the reference
    if len(sys.argv) < 2 or sys.argv[1] not in ("--record", "--print"):
        print(
            "usage: PYTHONPATH=<src of the reference code> python tests/test_newton.py "
            "--record [NAME ...]   (merges into tests/data/newton_reference.json)\n"
            "       ... --print [NAME ...]"
        )
        sys.exit(2)
    names = sys.argv[2:] or None
    result = compute(names)
    if sys.argv[1] == "--print":
        print(json.dumps(result, indent=1))
    else:
        old = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
        old.update(result)
        REFERENCE.parent.mkdir(exist_ok=True)
        REFERENCE.write_text(json.dumps(old, indent=1, sort_keys=True) + "\n")
        print(f"recorded {sorted(result)} into {REFERENCE}")


# ------------------------------------------------------------------------------ the driver
class _Quadratic:
    """f(x) = −½ xᵀAx + bᵀx (optimum A⁻¹b) for the driver, with a step scaled by ``damp``."""

    def __new__(cls, *args: Any, **kw: Any):  # built on the driver's base class lazily
        from stablearena.raters._newton import NewtonProblem

        class Problem(NewtonProblem):
            def __init__(self, a: np.ndarray, b: np.ndarray, damp: float = 1.0) -> None:
                self.a, self.b, self.damp = a, b, damp
                self.x = np.zeros(len(b))
                self.steps = 0

            def f(self, x: np.ndarray) -> float:
                return float(-0.5 * x @ self.a @ x + self.b @ x)

            def gradient_norm(self) -> float:
                return float(np.linalg.norm(self.b - self.a @ self.x))

            def value(self) -> float:
                return self.f(self.x)

            def direction(self) -> float:
                g = self.b - self.a @ self.x
                self.step = self.damp * np.linalg.solve(self.a, g)
                return float(g @ self.step)

            def trial(self, t: float) -> float:
                return self.f(self.x + t * self.step)

            def accept(self, t: float, f: float | None) -> None:
                self.x = self.x + t * self.step
                self.steps += 1

        return Problem(*args, **kw)


def test_the_driver_converges_in_one_newton_step_on_a_quadratic():
    from stablearena.raters._newton import newton

    a = np.array([[2.0, 0.5], [0.5, 1.0]])
    b = np.array([1.0, -2.0])
    problem = _Quadratic(a, b)
    conv = newton(problem, tol=1e-12, max_iter=10)
    assert conv.converged and conv.iterations == 1 and conv.solver == "newton"
    np.testing.assert_allclose(problem.x, np.linalg.solve(a, b), atol=1e-12)


def test_the_driver_backtracks_an_overlong_step_and_reports_the_iteration_limit():
    from stablearena.raters._newton import newton

    a, b = np.eye(2), np.array([1.0, 1.0])
    # a step 3× too long fails Armijo's test at t = 1 and passes at t = ½: x = 1.5, then 0.75
    problem = _Quadratic(a, b, damp=3.0)
    conv = newton(problem, tol=1e-12, max_iter=2)
    assert not conv.converged and conv.message == "stopped after 2 Newton iterations"
    np.testing.assert_allclose(problem.x, [0.75, 0.75])


def test_the_driver_stops_when_no_step_makes_progress():
    from stablearena.raters._newton import NO_PROGRESS, newton

    problem = _Quadratic(np.eye(1), np.array([1.0]), damp=-1.0)  # a descent direction
    conv = newton(problem, tol=1e-12, max_iter=10)
    assert not conv.converged and conv.message == NO_PROGRESS and problem.steps == 0
