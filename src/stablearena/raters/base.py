"""The rater interface shared by every rating model (docs/architecture.md).

A *rater* is constructed with its options (stored unchanged, nothing computed) and
``fit(battles_or_counts)`` returns an immutable :class:`Fitted` result. Every result carries
its scores on the natural log-odds scale (``scores``, mean zero), the Elo-scale ``ratings``,
the log-likelihood, a :class:`Convergence` report and the pair counts it was fitted on, so
bootstrap, metrics, selection and the CLI work with any rater.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .._numeric import DEFAULT_OFFSET as _DEFAULT_OFFSET
from .._numeric import ELO_SCALE as _ELO_SCALE
from .._numeric import expit
from ..choices import RATER_MODULES
from ..errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..data.battles import Battles, PairCounts

__all__ = [
    "ELO_SCALE",
    "DEFAULT_OFFSET",
    "Convergence",
    "Fitted",
    "Rater",
    "register_rater",
    "get_rater",
    "rater_names",
    "parse_anchor",
]

#: C = ln(10)/400: natural log-odds per Elo point (400 points = 10:1 odds), docs/methods/ratings.md
#: (the foundation's value, :data:`stablearena._numeric.ELO_SCALE`, which the data layer's
#: simulators share).
ELO_SCALE: float = _ELO_SCALE
#: Elo-scale ratings are mean-zero scores / C plus this offset unless a model is anchored.
DEFAULT_OFFSET: float = _DEFAULT_OFFSET


@dataclass(frozen=True)
class Convergence:
    """How a solver ended.

    ``grad_norm`` is the Euclidean norm of the log-likelihood gradient (natural units) divided
    by the number of comparisons — the "per battle" figure the tolerances refer to.
    """

    converged: bool
    iterations: int
    grad_norm: float
    solver: str
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "converged": self.converged,
            "iterations": self.iterations,
            "grad_norm": self.grad_norm,
            "solver": self.solver,
            "message": self.message,
        }


#: The largest |rating| an anchor (or Elo's initial rating) may set: beyond it a double keeps too
#: few digits for rating differences of a few points (at 1e15 its spacing is 0.125 points), and
#: at 1e308 the ratings overflow.
MAX_RATING = 1e6


def parse_anchor(anchor: str | tuple[str, float] | None) -> tuple[str, float] | None:
    """``"MODEL=RATING"`` or ``(model, rating)`` → ``(model, rating)``; |RATING| ≤
    :data:`MAX_RATING`."""
    if anchor is None:
        return anchor
    if isinstance(anchor, tuple):
        name, rating = anchor
    else:
        name, sep, value = str(anchor).rpartition("=")
        try:
            rating = float(value)
        except ValueError:
            rating = math.nan
        if not sep or not name or not math.isfinite(rating):
            raise InputError(f"anchor {anchor!r} must look like MODEL=RATING, e.g. gpt-4o=1200.")
    if not (isinstance(rating, (int, float)) and math.isfinite(rating)) or abs(rating) > MAX_RATING:
        raise InputError(
            f"anchor {anchor!r}: the rating must be a finite number from {-MAX_RATING:,.0f} to "
            f"{MAX_RATING:,.0f} (ratings are Elo points, e.g. gpt-4o=1200; beyond that the "
            f"differences between models lose their precision)."
        )
    return name, float(rating)


def _freeze(x: np.ndarray) -> np.ndarray:
    x = np.array(x, dtype=float, copy=True)
    x.flags.writeable = False
    return x


@dataclass(frozen=True, eq=False, kw_only=True)
class Fitted:
    """An immutable fitted rating model.

    Attributes:
        method: the rater's name (``"m-elo"``, ``"elo"``, …).
        models: model names, in the order of ``scores``.
        scores: log-strengths x on the natural log-odds scale, mean zero; for Bradley–Terry
            P(i beats j) = σ(x_i − x_j).
        loglik: total log-likelihood of the fitted model on ``counts``.
        n_comparisons: number of (weighted) comparisons the fit used.
        battles: comparisons per model.
        convergence: solver report.
        params: the rater's options.
        anchor: ``(model, rating)`` fixing the Elo scale, or ``None`` for mean = 1000.
        notes: warnings raised during the fit (e.g. a prior was needed).
        counts: the pair counts the model was fitted on.
    """

    method: str
    models: tuple[str, ...]
    scores: np.ndarray
    loglik: float
    n_comparisons: float
    battles: np.ndarray
    convergence: Convergence
    params: Mapping[str, Any] = field(default_factory=dict)
    anchor: tuple[str, float] | None = None
    notes: tuple[str, ...] = ()
    counts: PairCounts | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scores", _freeze(self.scores))
        object.__setattr__(self, "battles", _freeze(self.battles))
        if not np.all(np.isfinite(self.scores)):
            raise AssertionError("internal error: non-finite scores in a fitted result")  # noqa: TRY003
        if self.anchor is not None and self.anchor[0] not in self.models:
            raise InputError(
                f"anchor model {self.anchor[0]!r} is not among the fitted models; "
                f"choose one of: {', '.join(self.models[:10])}{' …' if len(self.models) > 10 else ''}."
            )

    # ------------------------------------------------------------------ scales
    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def elo_scale(self) -> float:
        """Natural units per Elo point for this model's ``ratings``."""
        return ELO_SCALE

    @property
    def ratings(self) -> np.ndarray:
        """Elo-scale ratings: x / C, shifted to mean 1000 or so that the anchor model reads its value."""
        r = self.scores / self.elo_scale
        if self.anchor is None:
            return r - r.mean() + DEFAULT_OFFSET
        k = self.models.index(self.anchor[0])
        return r - r[k] + self.anchor[1]

    @property
    def nll(self) -> float:
        """Negative log-likelihood per comparison (docs/methods/metrics.md)."""
        return -self.loglik / self.n_comparisons if self.n_comparisons > 0 else 0.0

    def index(self, model: str | int) -> int:
        if isinstance(model, (int, np.integer)):
            return int(model)
        try:
            return self.models.index(model)
        except ValueError:
            raise InputError(f"unknown model {model!r}.") from None

    # ------------------------------------------------------------------ prediction
    def predict(self, i: Any, j: Any) -> np.ndarray | float:
        """Expected score of i against j, E[W_ij] = P(i wins) + ½ P(tie).

        For Bradley–Terry models this is σ(x_i − x_j). ``i``/``j`` are indices (arrays allowed)
        or model names.
        """
        ii = np.vectorize(self.index)(i) if not isinstance(i, np.ndarray) else i
        jj = np.vectorize(self.index)(j) if not isinstance(j, np.ndarray) else j
        out = expit(self.scores[ii] - self.scores[jj])
        return float(out) if np.ndim(out) == 0 else out

    def win_matrix(self) -> np.ndarray:
        """m×m matrix of :meth:`predict` for every ordered pair (diagonal ½)."""
        m = self.n_models
        ii, jj = np.meshgrid(np.arange(m), np.arange(m), indexing="ij")
        return np.asarray(self.predict(ii, jj))

    # ------------------------------------------------------------------ presentation
    def order(self) -> np.ndarray:
        """Model indices from best to worst (ties in rating broken by name)."""
        return np.lexsort((np.array(self.models), -self.ratings))

    def leaderboard(self) -> pd.DataFrame:
        """Columns ``rank, model, rating, battles``, best first."""
        import pandas as pd

        return pd.DataFrame(self._leaderboard_records())

    def _leaderboard_records(self) -> list[dict[str, Any]]:
        """The rows of :meth:`leaderboard` as plain Python records (no pandas needed)."""
        order = self.order()
        ratings = self.ratings[order]
        battles = self.battles[order].round().astype(np.int64)
        return [
            {
                "rank": rank,
                "model": str(self.models[k]),
                "rating": float(ratings[rank - 1]),
                "battles": int(battles[rank - 1]),
            }
            for rank, k in enumerate(order.tolist(), start=1)
        ]

    def to_dict(self) -> dict[str, Any]:
        """The JSON contract of ``stablearena rank --format json`` (docs/architecture.md, foundation issue)."""
        return {
            "method": self.method,
            "n_battles": int(round(self.n_comparisons)),
            "n_models": self.n_models,
            "nll": float(self.nll),
            "models": self._leaderboard_records(),
            "convergence": self.convergence.to_dict(),
            "notes": list(self.notes),
        }

    # ------------------------------------------------------------------ information contract (docs/methods/uncertainty.md)
    # Consumed by :mod:`stablearena.raters.uncertainty`. The base class implements it for
    # Bradley–Terry-type results (m-elo, bt, and online elo read as BT with ties as half);
    # subclasses with other parameters (am-ELO, tie models) override these methods.
    def _bt_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(i, j, N, W)`` of a Bradley–Terry-type result: the count rows, the comparisons per
        outcome category (rows × categories) and the score W of i in each category.

        Ties as half (m-elo, elo): categories win, loss, tie (either kind) with W = 1, 0, ½.
        Ties dropped (bt): categories win, loss."""
        ties = _BT_LIKELIHOOD.get(self.method)
        if ties is None:
            raise NotImplementedError(
                f"{type(self).__name__} (method {self.method!r}) does not implement the information "
                "contract (parameters, hessian, score_contributions, refit); the class must override "
                "them to get Fisher, sandwich or bootstrap intervals."
            )
        if self.counts is None:
            raise NotImplementedError(
                f"this {self.method} result does not keep the pair counts it was fitted on."
            )
        c = self.counts.collapse()
        if ties == "half":
            counts = np.column_stack([c.wins, c.losses, c.all_ties])
            w = np.array([1.0, 0.0, 0.5])
        else:
            counts = np.column_stack([c.wins, c.losses])
            w = np.array([1.0, 0.0])
        return c.i, c.j, counts, w

    def _bt_square_rows(self) -> np.ndarray | None:
        """Σ w² per row and outcome category of :meth:`_bt_rows` (rows × categories) when the
        counts are sums of sampling weights (:attr:`PairCounts.squares`), else ``None``."""
        ties = _BT_LIKELIHOOD.get(self.method)
        if ties is None or self.counts is None or self.counts.squares is None:
            return None
        sq = self.counts.collapse().squares
        assert sq is not None
        if ties == "half":
            return np.column_stack([sq[:, 0], sq[:, 1], sq[:, 2] + sq[:, 3]])
        return np.ascontiguousarray(sq[:, :2])

    def parameters(self) -> np.ndarray:
        """The free-parameter vector at the optimum; its first ``n_models`` entries are ``scores``.

        Bradley–Terry-type results: the scores themselves."""
        self._bt_rows()
        return np.array(self.scores, dtype=float)

    def hessian(self) -> np.ndarray:
        """Hessian of the total log-likelihood with respect to :meth:`parameters`.

        Bradley–Terry (docs/methods/ratings.md, docs/methods/uncertainty.md): −Σ_rows n_r p_r (1 − p_r)(e_i − e_j)(e_i − e_j)ᵀ, a
        weighted graph Laplacian, singular along 1 (the shift of the scores)."""
        from .information import laplacian

        i, j, counts, _ = self._bt_rows()
        p = expit(self.scores[i] - self.scores[j])
        lap = laplacian(self.n_models, i, j, counts.sum(axis=1) * p * (1 - p))
        return np.negative(lap, out=lap)  # in place: one m×m array at thousands of models

    def score_contributions(self) -> tuple[np.ndarray, np.ndarray]:
        """``(G, N)``: G[r, o] is the gradient of ln P(outcome o | row r) with respect to
        :meth:`parameters`, N[r, o] how many comparisons of row r had outcome o; Σ N g gᵀ is the
        meat of the sandwich estimator.

        Bradley–Terry-type: ∇ = (W_o − p_r)(e_i − e_j) with W_o the outcome's score (a tie
        contributes ½ ln p + ½ ln(1 − p) under ties-as-half)."""
        i, j, counts, w = self._bt_rows()
        p = expit(self.scores[i] - self.scores[j])
        resid = w[None, :] - p[:, None]
        rows = np.arange(len(i))
        g = np.zeros((len(i), len(w), self.n_models))
        g[rows, :, i] = resid
        g[rows, :, j] = -resid
        return g, counts

    def gauge_constraints(self) -> np.ndarray:
        """Jacobian (n_params × k) of the constraints that fix the model's symmetries at the
        returned optimum; the covariance is computed on the subspace they leave free (bordered
        system, docs/methods/uncertainty.md). Default: mean-zero scores (the shift symmetry every model has)."""
        k = len(self.parameters())
        g = np.zeros((k, 1))
        g[: self.n_models, 0] = 1.0
        return g

    def dispersion(self) -> float:
        """Dispersion φ of the outcome scores about the model (Var W = φ p(1 − p)).

        1 for a proper likelihood. Under ties as half (m-elo, elo) a tie scores W = ½, whose
        variance is below the Bernoulli p(1 − p), so the log-likelihood is a quasi-likelihood
        (Wedderburn 1974; McCullagh & Nelder 1989, §9.2) and φ is estimated by Pearson's
        statistic Σ_battles (W − p)² / (p(1 − p)) / (n − m + 1) when the data hold ties."""
        if _BT_LIKELIHOOD.get(self.method) != "half" or self.counts is None:
            return 1.0
        i, j, counts, w = self._bt_rows()
        if counts[:, 2].sum() <= 0:
            return 1.0
        p = expit(self.scores[i] - self.scores[j])
        v = p * (1 - p)
        pearson = float(np.sum(counts * (w[None, :] - p[:, None]) ** 2 / v[:, None]))
        dof = float(counts.sum()) - (self.n_models - 1)
        return pearson / dof if dof > 0 else 1.0

    def refit(self, counts: PairCounts) -> Fitted:
        """Fit the same model with the same options to ``counts`` (the same rows with other
        counts, e.g. a bootstrap resample), warm-started from this result."""
        return get_rater(self.method, **dict(self.params)).fit_warm(counts, self)

    def resampling_table(self) -> np.ndarray:
        """What a battle bootstrap resamples: rows × 4 counts (A won, B won, tie, both bad) of
        the rows the likelihood is evaluated on — the pair counts, unless a model's likelihood
        needs finer rows (style covariates). Resampling battles = multinomial on these cells."""
        c = self.counts
        if c is None:
            raise InputError(
                f"this {self.method} result does not keep its pair counts; it cannot be "
                "bootstrapped."
            )
        return np.column_stack([c.wins, c.losses, c.ties, c.ties_both_bad])

    def refit_table(self, table: np.ndarray) -> Fitted:
        """:meth:`refit` on the rows of :meth:`resampling_table` with the counts ``table``
        (rows × 4; a bootstrap resample), warm-started from this result."""
        c = self.counts
        assert c is not None  # resampling_table has checked
        return self.refit(c.with_counts(table[:, 0], table[:, 1], table[:, 2], table[:, 3]))

    @property
    def resamples_pair_counts(self) -> bool:
        """Whether :meth:`resampling_table` is the pair counts (a clustered bootstrap maps
        battles to its rows only then)."""
        return type(self).resampling_table is Fitted.resampling_table


#: How Bradley–Terry-type methods treat ties in their likelihood (information contract).
_BT_LIKELIHOOD: dict[str, str] = {"m-elo": "half", "elo": "half", "bt": "drop"}


class Rater(ABC):
    """A rating method. Subclasses are dataclasses whose fields are the options."""

    name: ClassVar[str]

    @abstractmethod
    def fit(self, data: Battles | PairCounts) -> Fitted:
        """Fit on a battle log or its pair counts and return an immutable result."""

    def get_params(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]

    def fit_warm(self, data: Battles | PairCounts, start: Fitted) -> Fitted:
        """Fit on ``data`` starting from ``start`` (a result of this rater on similar data, e.g.
        before a bootstrap resample). Default: a plain :meth:`fit`; iterative raters override."""
        return self.fit(data)


_REGISTRY: dict[str, Callable[..., Rater]] = {}

#: Rater name → the module that registers it. Rater modules are imported only when one of their
#: raters is asked for (start-up speed, see :mod:`stablearena.cli`); a new rater module adds its
#: names here (or is imported by the caller before :func:`get_rater`).
# (the table lives in the light module stablearena.choices so that the CLI can show the names
# without importing any rater)


def _load_rater_modules(name: str | None = None) -> None:
    """Import the module registering ``name`` (every rater module when ``None``)."""
    import importlib

    wanted = [RATER_MODULES[name]] if name in RATER_MODULES else sorted(set(RATER_MODULES.values()))
    for module in wanted:
        importlib.import_module(module)


def registering(registry: dict[str, Any], name: str) -> Callable[[type], type]:
    """A class decorator giving the class the ``name`` attribute ``name`` and adding it to
    ``registry`` under that name (the raters' here, the pair selectors' in
    :mod:`stablearena.design.selection`)."""

    def deco(cls: type) -> type:
        cls.name = name  # type: ignore[attr-defined]
        registry[name] = cls
        return cls

    return deco


def register_rater(name: str) -> Callable[[type], type]:
    """Class decorator adding a rater to the registry used by :func:`get_rater` and the CLI."""
    return registering(_REGISTRY, name)


def rater_names() -> list[str]:
    """Names of every rater (:func:`get_rater` accepts each)."""
    _load_rater_modules()
    return sorted(_REGISTRY)


def rater_class(name: str) -> Callable[..., Rater]:
    """The class registered as ``name`` (its module imported on first use)."""
    if name not in _REGISTRY:
        _load_rater_modules(name)
    if name not in _REGISTRY:
        _load_rater_modules()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(
            f"unknown method {name!r}; choose one of {', '.join(rater_names())}."
        ) from None


def get_rater(name: str, **options: Any) -> Rater:
    """Construct the rater registered as ``name`` with ``options``."""
    cls = rater_class(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise InputError(f"method {name!r} does not take these options: {exc}") from None
