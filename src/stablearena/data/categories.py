"""Category boards: battles filtered by, or split by, any column of the log.

``--where COLUMN=VALUE`` keeps the battles whose COLUMN reads VALUE (repeat the option for more
conditions: conditions on different columns must all hold, several values of one column are
alternatives); ``--by COLUMN`` gives one board per value of COLUMN. Values are compared as text:
numbers in their shortest form (``3``, ``0.5``), booleans as ``true``/``false`` (``1``/``0`` are
accepted too), missing values as ``null``. Columns are the log's extra columns
(:attr:`stablearena.data.battles.Battles.extra`, kept by ``read_battles(extra=...)``), nested fields
named ``parent.child`` (e.g. ``category_tag.math_v0.1.math``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from .battles import Battles

__all__ = ["parse_where", "value_labels", "where", "split_by"]


def parse_where(items: Sequence[str] | None) -> dict[str, list[str]]:
    """``["COLUMN=VALUE", …]`` → {column: [values]} (the last ``=`` does not split: the first
    does, so values may contain ``=``)."""
    out: dict[str, list[str]] = {}
    for item in items or ():
        col, sep, value = item.partition("=")
        if not sep or not col.strip():
            raise InputError(
                f"--where {item!r} must look like COLUMN=VALUE, e.g. --where language=en."
            )
        out.setdefault(col.strip(), []).append(value.strip())
    return out


def _label(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)):
        if np.isnan(value):
            return "null"
        return str(int(value)) if float(value).is_integer() else repr(float(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return str(value)


def value_labels(column: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """(codes, labels): each battle's value as text (module docstring), labels sorted."""
    col = np.asarray(column)
    if col.dtype != object:
        codes, uniques = pd.factorize(pd.Series(col), use_na_sentinel=False)
    else:
        keys = np.array([_label(v) if not isinstance(v, str) else v for v in col], dtype=object)
        codes, uniques = pd.factorize(pd.Series(keys), use_na_sentinel=False)
    labels = [_label(u) for u in uniques]
    order = np.argsort(np.array(labels, dtype=object), kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], [labels[k] for k in order]


def _aliases(value: str) -> set[str]:
    low = value.strip().lower()
    out = {value, low}
    if low in ("1", "true", "yes"):
        out |= {"true", "1"}
    if low in ("0", "false", "no"):
        out |= {"false", "0"}
    if low in ("", "none", "nan", "null"):
        out.add("null")
    try:
        out.add(_label(float(value)))
    except ValueError:
        pass
    return out


def _column(battles: Battles, name: str) -> np.ndarray:
    extra = battles.extra or {}
    if name not in extra:
        raise InputError(
            f"{battles.source}: no column {name!r} to filter or split by; kept columns: "
            f"{', '.join(extra) or 'none'} (nested fields are named parent.child)."
        )
    return extra[name]


def where(battles: Battles, conditions: Mapping[str, Sequence[str]]) -> Battles:
    """The battles meeting every condition {column: allowed values} (models left without battles
    are dropped). An empty result is an error naming the values the column does have."""
    keep = np.ones(len(battles), dtype=bool)
    for name, values in conditions.items():
        codes, labels = value_labels(_column(battles, name))
        wanted = set().union(*(_aliases(v) for v in values))
        hit = np.array([lab in wanted or lab.lower() in wanted for lab in labels], dtype=bool)
        if not hit.any():
            shown = ", ".join(labels[:12]) + (" …" if len(labels) > 12 else "")
            raise InputError(
                f"{battles.source}: column {name!r} never reads {' or '.join(map(repr, values))}; "
                f"its values are: {shown}."
            )
        keep &= hit[codes]
    if not keep.any():
        raise InputError(f"{battles.source}: no battle meets all the --where conditions together.")
    return battles.take(keep).compact()


def split_by(battles: Battles, name: str) -> dict[str, Battles]:
    """One log per value of column ``name`` (values as text, sorted)."""
    codes, labels = value_labels(_column(battles, name))
    return {lab: battles.take(codes == k).compact() for k, lab in enumerate(labels)}
