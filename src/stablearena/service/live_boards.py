"""Style-controlled and category boards of the live arena: ``/v1/leaderboard?style=true``,
``?where=COLUMN=VALUE`` and ``?by=COLUMN`` fit the arena's export exactly as ``stablearena rank
--covariate … --where … --by …`` fits the exported file (docs/guides/arena-page.md).

Style control reads the per-side style counts stored with each held battle's answers
(``style_tokens_a:style_tokens_b``, headers, lists, bold; stablearena.data.style_features), so it
uses the battles the arena held (votes of API clients carry no answers); a feature that is the
same in every battle cannot be estimated and is left out (the answer's ``style_left_out``).
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..errors import InputError

__all__ = ["STYLE_COVARIATES", "export_frame", "live_boards"]

#: The covariates of ``?style=true``: each style count of side a against side b.
STYLE_COVARIATES: tuple[str, ...] = tuple(
    f"style_{f}_a:style_{f}_b" for f in ("tokens", "headers", "lists", "bold")
)


def live_boards(
    engine: Any,
    method: str,
    *,
    style: bool,
    where_items: Sequence[str],
    by: str | None,
    ci: str = "none",
    level: float = 0.95,
    keep_non_anony: bool = False,
    config: Any = None,
    frame: Any = None,
) -> dict[str, Any]:
    """The board (or, with ``by``, ``{"boards": {value: board}}``) of the arena's current votes,
    filtered by ``where_items`` (``COLUMN=VALUE``) and style-controlled with ``style``; the
    votes of non-anonymous battles (``anony`` false) only with ``keep_non_anony``.

    ``method`` "am-elo" is the published board's: under the crowd rule (``config``, the
    arena's :class:`~stablearena.service.settings.ArenaConfig`, ``board_rule = "crowd"``) each
    board is :func:`stablearena.crowd.rule.crowd_fit` with the arena's options (no flood test: a
    board of the export has no days of record), and a style-controlled one is m-ELO's with
    style covariates (every vote counts, as under the crowd rule; am-ELO's style fit needs
    accounts with many votes). ``frame``: the export already read (:func:`export_frame`), for
    several boards of one moment."""

    from ..analysis.leaderboard import leaderboard_payload
    from ..choices import style_method
    from ..data.categories import parse_where, split_by, where
    from ..data.io import read_battles
    from ..data.style_features import add_covariates
    from ..raters import get_rater

    df = export_frame(engine) if frame is None else frame.copy()
    if df is None or df.empty:
        raise InputError("the arena has no votes yet")
    left_out: list[str] = []
    covariates: list[str] = []
    if style:
        if "status" not in df.columns:
            raise InputError("style control needs battles the arena held (with their answers)")
        df = df[df["status"] == "complete"].reset_index(drop=True)
        for spec in STYLE_COVARIATES:
            a, b = spec.split(":")
            diff = (df[a] - df[b]) / (df[a] + df[b] + 1)
            (covariates if diff.nunique() > 1 else left_out).append(spec)
        if not covariates:
            raise InputError("every style feature is the same in every battle; nothing to control")
    with warnings.catch_warnings():  # the default board leaves non-anonymous votes out: said
        warnings.simplefilter("ignore")
        battles = read_battles(df, extra="*", source="live arena", keep_non_anony=keep_non_anony)
    conditions = parse_where(where_items)
    if conditions:
        battles = where(battles, conditions)
    if covariates:
        battles = add_covariates(battles, covariates)
    crowd = _crowd_rule(config) if method == "am-elo" else None
    if crowd is not None and style:
        method = "m-elo"
    rater = get_rater(style_method(method) if style else method)
    boards = split_by(battles, by) if by else {"": battles}
    out: dict[str, Any] = {}
    for value, board in boards.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if crowd is not None and not style:
                from ..crowd.rule import crowd_fit

                fitted = crowd_fit(board.counts(by_annotator=True), crowd).fitted
            else:
                fitted = rater.fit(board)
            payload = leaderboard_payload(fitted, board, source="live arena", ci=ci, level=level)
        if conditions:
            payload["where"] = conditions
        if style:
            payload["style_left_out"] = left_out
        if by:
            payload["by"] = {by: value}
        out[value] = payload
    return {"boards": out} if by else out[""]


def export_frame(engine: Any) -> Any:
    """The arena's export as :func:`live_boards` reads it (a DataFrame; None: no votes)."""
    import pandas as pd

    from .api.admin import export

    raw, _ = export(engine, "jsonl", False)
    return pd.read_json(io.BytesIO(raw), lines=True, dtype=False) if raw.strip() else None


def _crowd_rule(config: Any) -> Any:
    """The crowd rule of an arena's config (None: the am-ELO rule, or no config)."""
    if config is None:
        return None
    from ..crowd.board_rule import ArenaRule

    cfg = config.model_dump() if hasattr(config, "model_dump") else dict(config)
    if cfg.get("board_rule", "crowd") != "crowd":
        return None
    return replace(ArenaRule.from_config({**cfg, "board_rule": "crowd"}).crowd(), flood_days=None)
