"""One damped-Newton driver for every model family (Bradley–Terry, am-ELO, the tie models and
style control).

A family supplies, at its current point, the gradient norm, a Newton step (its own gradient,
Hessian and KKT system) and the objective along that step; the driver owns what they share:

- the iteration: the convergence check, the iteration limit and the convergence report
  (:class:`~stablearena.raters.base.Convergence`);
- step acceptance: a backtracking (Armijo) line search that tries the full Newton step first
  and halves it, accepting f(t) ≥ f(0) + 10⁻⁴·t·slope (minus an optional rounding allowance);
  near the optimum, where the objective changes by less than its rounding error, the full step
  is accepted when it shrinks the gradient instead;
- stopping when no step makes progress in floating point — converged if the gradient is then
  within ten times the tolerance.

Damping of the Newton system itself (a ridge, the Fisher matrix where the Hessian is not
definite) is the family's: it depends on the family's constraints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from .base import Convergence

__all__ = ["NO_PROGRESS", "Step", "NewtonProblem", "line_search", "newton"]

NO_PROGRESS = "line search made no progress (gradient at floating-point noise level)"

#: Armijo's sufficient-increase constant.
ARMIJO = 1e-4

#: A slope this small relative to |f| is below the objective's rounding error.
TINY_SLOPE = 1e-12


@dataclass
class Step:
    """A Newton step from the current point, as the line search sees it.

    ``slope``: ∇f·step (> 0 for an ascent direction). ``trial(t)``: the objective at
    current + t·step (value only). ``full()``: the objective at the full step (a family may
    compute and keep its derivatives there, since a full step is the usual outcome);
    ``full_gradient_norm()``: ‖∇f‖/n there (after ``full()``), or ``None`` for a family without
    the near-optimum rule. ``ascends()``: optional test that the full step passes Armijo's test
    without evaluating f — for a concave objective, ∇f(x + step)·step ≥ 10⁻⁴·slope suffices.
    ``t_max``: the longest step allowed (< 1 when a bound is in the way).
    """

    slope: float
    trial: Callable[[float], float]
    full: Callable[[], float] | None = None
    full_gradient_norm: Callable[[], float] | None = None
    ascends: Callable[[], bool] | None = None
    t_max: float = 1.0


def line_search(
    f0: Callable[[], float],
    step: Step,
    gnorm: float,
    *,
    min_t: float = 1e-10,
    noise: float = 0.0,
) -> tuple[float, float | None] | None:
    """Backtracking along ``step``: the step length t accepted and f there (``None`` when the
    concavity test accepted the full step without f), or ``None`` when no t ≥ ``min_t`` makes
    progress. ``f0()`` gives the objective at the current point (called only when needed);
    ``noise`` is a rounding allowance relative to |f0| in Armijo's test."""
    if step.ascends is not None and step.ascends():
        return 1.0, None
    f = f0()
    allowance = noise * abs(f)
    t = step.t_max
    if t >= 1.0:
        f1 = step.full() if step.full is not None else step.trial(1.0)
        if math.isfinite(f1):
            if f1 >= f + ARMIJO * step.slope - allowance:
                return 1.0, f1
            tiny = abs(step.slope) <= TINY_SLOPE * max(abs(f), 1.0)
            if tiny and step.full_gradient_norm is not None and step.full_gradient_norm() < gnorm:
                return 1.0, f1
        t = 0.5
    while True:
        ft = step.trial(t)
        if math.isfinite(ft) and ft >= f + ARMIJO * t * step.slope - allowance:
            return t, ft
        t *= 0.5
        if t < min_t:
            return None


class NewtonProblem:
    """What a model family gives :func:`newton`; override the methods marked so.

    The family keeps its current point; the driver calls, per iteration: :meth:`prepare`,
    :meth:`gradient_norm`, :meth:`at_optimum`, :meth:`check`, :meth:`direction`, then the line
    search on the :class:`Step` and :meth:`accept`; :meth:`finish` after the last."""

    #: rounding allowance of Armijo's test, relative to |f| (see :func:`line_search`)
    noise: float = 0.0
    #: shortest step the line search tries
    min_t: float = 1e-10
    #: the objective at the current point (kept by the family; see :meth:`value`)
    f: float | None = None
    #: steps taken with the Gauss–Newton (Fisher) matrix where the Hessian was not definite
    fisher_steps: int = 0

    def prepare(self) -> None:
        """Before the convergence check (e.g. give a runaway parameter its prior)."""

    def gradient_norm(self) -> float:  # override
        """‖∇f‖ per comparison at the current point (projected on the constraints)."""
        raise NotImplementedError

    def at_optimum(self, gnorm: float, tol: float) -> bool | None:
        """Converged (True), not yet (False), or the objective changed and the check must be
        repeated (None). Default: ``gnorm <= tol``."""
        return gnorm <= tol

    def check(self, iteration: int) -> str | None:
        """Before a step: a message to stop with (e.g. stalled), or ``None``; may raise."""
        return None

    def value(self) -> float:
        """The objective at the current point (default: the attribute ``f`` the family keeps)."""
        assert self.f is not None
        return self.f

    def direction(self) -> Step | str:  # override
        """The Newton step, or a message why there is none."""
        raise NotImplementedError

    def accept(self, t: float, f: float | None) -> None:  # override
        """Move to current + t·step; ``f``: the objective there, if the line search knows it."""
        raise NotImplementedError

    def finish(self, message: str) -> str:
        """The report's message — by default noting the Gauss–Newton steps when the solve ended
        normally; a family may also restore its state here."""
        if self.fisher_steps and not message:
            return f"{self.fisher_steps} Gauss–Newton step(s) where the Hessian was indefinite"
        return message


def newton(
    problem: NewtonProblem, *, tol: float, max_iter: int, solver: str = "newton"
) -> Convergence:
    """Damped Newton ascent on ``problem`` (module docstring). Converged when the gradient norm
    per comparison is ≤ ``tol`` (and the family agrees, :meth:`NewtonProblem.at_optimum`)."""
    it = 0
    message = ""
    converged = False
    gnorm = math.inf
    while True:
        problem.prepare()
        gnorm = problem.gradient_norm()
        done = problem.at_optimum(gnorm, tol)
        if done is None:
            continue
        if done:
            converged = True
            break
        if it >= max_iter:
            message = f"stopped after {max_iter} Newton iterations"
            break
        stop = problem.check(it)
        if stop:
            message = stop
            break
        it += 1
        step = problem.direction()
        if isinstance(step, str):
            message = step
            break
        found = line_search(problem.value, step, gnorm, min_t=problem.min_t, noise=problem.noise)
        if found is None:
            message = NO_PROGRESS
            converged = gnorm <= max(tol, 1e-12) * 10
            break
        problem.accept(*found)
    return Convergence(converged, it, gnorm, solver, problem.finish(message))
