"""The command line's rater flags → a rater: :func:`build_rater` and :func:`rater_options`,
shared by ``rank`` (:mod:`.rank`) and the style and category boards (:mod:`.boards`).

Only stdlib and the package's light modules at module level (CLI start-up time).
"""

from typing import Any

from .. import choices
from ..errors import InputError

__all__ = ["RATER_FLAGS", "RATER_PARAMS", "build_rater", "rater_options"]

#: CLI flag → rater option (dataclass field) name.
RATER_FLAGS: dict[str, str] = {
    "--solver": "solver",
    "--anchor": "anchor",
    "--elo-k": "k",
    "--shuffles": "shuffles",
    "--seed": "seed",
    "--min-records": "min_records",
    "--ability-threshold": "ability_threshold",
    "--exclude-flagged": "exclude_flagged",
    "--k-tie": "k_tie",
    "--k-cov": "k_cov",
    "--tie-form": "tie_form",
    "--confidence": "confidence",
    "--normalization": "normalization",
    "--penalty": "penalty",
    "--reg": "reg",
}


def build_rater(method: str, given: dict[str, Any]) -> Any:
    """The rater for ``method`` with the options the user set (unset ones keep the rater's defaults)."""
    from dataclasses import fields, is_dataclass

    from ..raters.base import get_rater, rater_class

    if method not in choices.RATER_MODULES:
        raise InputError(
            f"unknown --method {method!r}; choose one of {', '.join(sorted(choices.RATER_MODULES))}."
        )
    cls = rater_class(method)
    accepted = {f.name for f in fields(cls)} if is_dataclass(cls) else set()
    options = {}
    for flag, value in given.items():
        if value is None or value is False:
            continue
        name = RATER_FLAGS[flag]
        if name not in accepted:
            raise InputError(f"option {flag} does not apply to --method {method}.")
        options[name] = value
    if "k_cov" in options and isinstance(options["k_cov"], str):
        options["k_cov"] = (
            None if options["k_cov"].lower() == "none" else _int(options["k_cov"], "--k-cov")
        )
    return get_rater(method, **options)


def _int(text: str, flag: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise InputError(f"{flag} must be an integer or 'none', not {text!r}.") from None
    if value < 0:
        raise InputError(f"{flag} must be 'none' or an integer ≥ 0, not {value}.")
    return value


RATER_PARAMS: dict[str, str] = {
    "solver": "--solver",
    "anchor": "--anchor",
    "elo_k": "--elo-k",
    "shuffles": "--shuffles",
    "seed": "--seed",
    "min_records": "--min-records",
    "ability_threshold": "--ability-threshold",
    "exclude_flagged": "--exclude-flagged",
    "k_tie": "--k-tie",
    "k_cov": "--k-cov",
    "tie_form": "--tie-form",
    "confidence": "--confidence",
    "normalization": "--normalization",
    "penalty": "--penalty",
    "reg": "--reg",
}


def rater_options(options: dict[str, Any]) -> dict[str, Any]:
    """Check the interval options and return the rater flags the user set (for
    :func:`build_rater`). ``options``: a command's arguments by parameter name (``method``,
    ``ci``, ``cluster``, ``seed`` and the rater options of :data:`RATER_PARAMS`; those a command
    does not take count as unset)."""
    ci, cluster, method, seed = (
        options["ci"],
        options["cluster"],
        options["method"],
        options["seed"],
    )
    from dataclasses import fields, is_dataclass

    from ..raters.base import rater_class

    if ci not in ("none", *choices.CI_METHODS):
        raise InputError(f"--ci must be none, {', '.join(choices.CI_METHODS)}, not {ci!r}.")
    if cluster is not None and ci != "bootstrap":
        raise InputError("--cluster applies to the bootstrap: add --ci bootstrap.")
    given = {flag: options.get(name) for name, flag in RATER_PARAMS.items()}
    cls = rater_class(method) if method in choices.RATER_MODULES else None
    if seed is not None and ci != "none" and cls is not None and is_dataclass(cls):
        # --seed also seeds the intervals; pass it to the rater only if the rater takes one
        if "seed" not in {f.name for f in fields(cls)}:
            given["--seed"] = None
    return given
