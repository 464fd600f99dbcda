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

from .base import Convergence

__all__ = ["NO_PROGRESS", "NewtonProblem", "line_search", "newton"]

NO_PROGRESS = "line search made no progress (gradient at floating-point noise level)"

#: Armijo's sufficient-increase constant.
ARMIJO = 1e-4

#: A slope this small relative to |f| is below the objective's rounding error.
TINY_SLOPE = 1e-12


def line_search(
    problem: NewtonProblem, slope: float, gnorm: float
) -> tuple[float, float | None] | None:
    """Backtracking along the problem's step (slope ∇f·step > 0): the step length t accepted and
    f there (``None`` when :meth:`NewtonProblem.ascends` accepted the full step without f), or
    ``None`` when no t ≥ ``problem.min_t`` makes progress."""
    if problem.ascends():
        return 1.0, None
    f = problem.value()
    allowance = problem.noise * abs(f)
    t = problem.max_step()
    if t >= 1.0:
        f1 = problem.full()
        if math.isfinite(f1):
            if f1 >= f + ARMIJO * slope - allowance:
                return 1.0, f1
            if abs(slope) <= TINY_SLOPE * max(abs(f), 1.0):
                g1 = problem.full_gradient_norm()
                if g1 is not None and g1 < gnorm:
                    return 1.0, f1
        t = 0.5
    while True:
        ft = problem.trial(t)
        if math.isfinite(ft) and ft >= f + ARMIJO * t * slope - allowance:
            return t, ft
        t *= 0.5
        if t < problem.min_t:
            return None


class NewtonProblem:
    """What a model family gives :func:`newton`: a small protocol; override the methods marked
    so (the others have defaults).

    The family keeps its current point and, after :meth:`direction`, the step from it; the
    driver calls, per iteration: :meth:`prepare`, :meth:`gradient_norm`, :meth:`at_optimum`,
    :meth:`check`, :meth:`direction`, then the line search (:meth:`ascends`, :meth:`full`,
    :meth:`full_gradient_norm`, :meth:`trial`) and :meth:`accept`; :meth:`finish` after the
    last."""

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

    def direction(self) -> float | str:  # override
        """Compute and keep the Newton step; return its slope ∇f·step, or a message why there is
        no ascent step."""
        raise NotImplementedError

    def trial(self, t: float) -> float:  # override
        """The objective at current + t·step (value only)."""
        raise NotImplementedError

    def full(self) -> float:
        """The objective at the full step (a family may compute and keep its derivatives there:
        a full step is the usual outcome)."""
        return self.trial(1.0)

    def full_gradient_norm(self) -> float | None:
        """‖∇f‖/n at the full step (after :meth:`full`), for the near-optimum rule; ``None``: the
        family does not use that rule."""
        return None

    def ascends(self) -> bool:
        """Whether the full step passes Armijo's test without evaluating f (for a concave
        objective, ∇f(x + step)·step ≥ 10⁻⁴·slope suffices). Default: no shortcut."""
        return False

    def max_step(self) -> float:
        """The longest step allowed along the step (< 1 when a bound is in the way)."""
        return 1.0

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
        slope = problem.direction()
        if isinstance(slope, str):
            message = slope
            break
        found = line_search(problem, slope, gnorm)
        if found is None:
            message = NO_PROGRESS
            converged = gnorm <= max(tol, 1e-12) * 10
            break
        problem.accept(*found)
    return Convergence(converged, it, gnorm, solver, problem.finish(message))
