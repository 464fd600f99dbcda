"""A compiled scatter-add for the pair counts, borrowed from SciPy without importing SciPy.

Counting battles is one scatter-add: ``table[key[k], outcome[k]] += weight[k]`` for every
battle k (docs/methods/data.md). NumPy has no single pass for it — ``np.bincount`` needs the
outcome folded into the key (two more passes), casts the keys to ``intp`` and scans them for
their minimum and maximum before it counts. SciPy's sparse-matrix kernel ``coo_todense`` (in
the extension module ``scipy.sparse._sparsetools``; it sums duplicate entries of a COO matrix
into a dense one) is exactly that loop, compiled: ``Bx[Ai[k]·n_col + Aj[k]] += Ax[k]``.

Importing it the ordinary way imports ``scipy.sparse`` (about 0.2 s, which the start-up paths
avoid); the extension module alone loads in well under a millisecond. So :func:`coo_todense`
loads that one file from SciPy's installed package without running the package's
``__init__``, and takes it out of ``sys.modules`` again so that a later ``import scipy.sparse``
sets itself up as usual. The module is private to SciPy: it is checked on a small input when
loaded, and ``None`` is returned — the callers then count with ``np.bincount`` — if it is
missing or behaves differently. The kernel does not check bounds: callers must pass indices
known to lie inside the table.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Callable
from functools import lru_cache

import numpy as np

__all__ = ["coo_todense"]

_NAME = "scipy.sparse._sparsetools"


@lru_cache(maxsize=1)
def coo_todense() -> Callable[..., None] | None:
    """SciPy's ``coo_todense(n_row, n_col, nnz, Ai, Aj, Ax, Bx, fortran)``, or ``None``.

    It adds ``Ax[k]`` to ``Bx[Ai[k]·n_col + Aj[k]]`` for k < nnz (C order when ``fortran`` is 0);
    ``Ai`` and ``Aj`` share one integer type (int32 or int64), ``Ax`` and ``Bx`` one value type,
    ``Bx`` is written in place. Loaded once per process (see the module docstring)."""
    try:
        func = _load().coo_todense
        bx = np.zeros(8, dtype=np.int32)
        ai, aj = np.array([0, 1, 1], dtype=np.int32), np.array([3, 0, 0], dtype=np.int32)
        func(2, 4, 3, ai, aj, np.ones(3, dtype=np.int32), bx, 0)
        fx = np.zeros(8)
        func(2, 4, 3, ai.astype(np.int64), aj.astype(np.int64), np.array([0.5, 1, 2]), fx, 0)
    except Exception:  # noqa: BLE001 - any failure means: count with NumPy instead
        return None
    if bx.tolist() != [0, 0, 0, 1, 2, 0, 0, 0] or fx.tolist() != [0, 0, 0, 0.5, 3, 0, 0, 0]:
        return None
    return func


def _load() -> object:
    """The extension module: SciPy's own when ``scipy.sparse`` is imported, else loaded from
    its file under its own name and removed from ``sys.modules`` again."""
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.find_spec("scipy")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("scipy is not installed")
    folder = os.path.join(next(iter(spec.submodule_search_locations)), "sparse")
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(folder, "_sparsetools" + suffix)
        if os.path.exists(path):
            break
    else:
        raise ImportError(f"no {_NAME} extension in {folder}")
    loader = importlib.machinery.ExtensionFileLoader(_NAME, path)
    ext_spec = importlib.util.spec_from_file_location(_NAME, path, loader=loader)
    assert ext_spec is not None
    try:
        module = importlib.util.module_from_spec(ext_spec)
        loader.exec_module(module)
    finally:
        sys.modules.pop(_NAME, None)
    return module
