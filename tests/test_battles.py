"""Battles, outcome labels and the pair-count sufficient statistic."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena import Battles, InputError, Outcome, PairCounts, parse_outcomes


def reference_counts(b: Battles) -> dict[tuple[int, int], list[float]]:
    """Per-battle Python loop: the obviously-correct aggregation the fast one must match."""
    out: dict[tuple[int, int], list[float]] = {}
    w = b.weights()
    for a, c, o, wt in zip(b.model_a, b.model_b, b.outcome, w, strict=True):
        i, j = (int(a), int(c)) if a < c else (int(c), int(a))
        code = int(o)
        if a > c and code < 2:
            code = 1 - code
        out.setdefault((i, j), [0.0, 0.0, 0.0, 0.0])[code] += float(wt)
    return out


def as_dict(c: PairCounts) -> dict[tuple[int, int], list[float]]:
    return {
        (int(i), int(j)): [float(a), float(b), float(t), float(u)]
        for i, j, a, b, t, u in zip(
            c.i, c.j, c.wins, c.losses, c.ties, c.ties_both_bad, strict=True
        )
    }


battle_logs = st.integers(2, 7).flatmap(
    lambda m: st.lists(
        st.tuples(
            st.integers(0, m - 1), st.integers(0, m - 2), st.integers(0, 3), st.floats(0.1, 3.0)
        ),
        min_size=1,
        max_size=60,
    ).map(lambda rows: (m, rows))
)


def make(m: int, rows: list[tuple[int, int, int, float]], weighted: bool) -> Battles:
    a = np.array([r[0] for r in rows])
    b = np.array([r[1] for r in rows])
    b = b + (b >= a)
    return Battles(
        models=tuple(f"m{k}" for k in range(m)),
        model_a=a.astype(np.int32),
        model_b=b.astype(np.int32),
        outcome=np.array([r[2] for r in rows], dtype=np.int8),
        weight=np.array([r[3] for r in rows]) if weighted else None,
    )


@settings(max_examples=60, deadline=None)
@given(battle_logs, st.booleans())
def test_counts_equal_per_battle_reference(log, weighted):
    b = make(*log, weighted)
    got = as_dict(b.counts())
    ref = reference_counts(b)
    assert got.keys() == ref.keys()
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(battle_logs)
def test_counts_by_annotator_collapse_to_pair_counts(log):
    m, rows = log
    b = make(m, rows, False)
    rng = np.random.default_rng(len(rows))
    ann = rng.integers(0, 3, len(b)).astype(np.int32)
    from dataclasses import replace

    b = replace(b, annotator=ann, annotators=("x", "y", "z"))
    assert as_dict(b.counts(by_annotator=True).collapse()) == as_dict(b.counts())


def reference_rows(
    m: int,
    a: np.ndarray,
    b: np.ndarray,
    oc: np.ndarray,
    w: np.ndarray | None,
    ann: np.ndarray | None,
) -> dict[tuple[int, int, int], list[float]]:
    """(i, j, annotator) → [A, B, tie, both-bad] counts seen from i < j, one battle at a time."""
    ref: dict[tuple[int, int, int], list[float]] = {}
    for r in range(len(a)):
        lo, hi = sorted((int(a[r]), int(b[r])))
        code = int(oc[r]) if a[r] < b[r] or oc[r] >= 2 else 1 - int(oc[r])
        cell = ref.setdefault((lo, hi, 0 if ann is None else int(ann[r])), [0.0] * 4)
        cell[code] += 1.0 if w is None else float(w[r])
    return ref


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([3, 9, 700]),
    st.integers(1, 80),
    st.integers(1, 3),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**32 - 1),
)
def test_count_rows_both_paths_match_reference(m, n, n_ann, by_annotator, weighted, seed):
    """count_rows against a per-battle loop, rows in (i, j, annotator) order: m = 3 and 9 take
    the dense bincount table (every pair seen, or some pairs missing), m = 700 the sorted keys;
    zero-weight battles still make their row."""
    from stablearena.data.battles import count_rows

    rng = np.random.default_rng(seed)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    oc = rng.integers(0, 4, n).astype(np.int8)
    w = rng.choice([0.0, 0.5, 2.0], n) if weighted else None
    ann = rng.integers(0, n_ann, n).astype(np.int32) if by_annotator else None
    ref = reference_rows(m, a, b, oc, w, ann)
    i, j, got_ann, table = count_rows(
        a.astype(np.int32),
        b.astype(np.int32),
        oc,
        m,
        weight=w,
        annotator=ann,
        n_annotators=n_ann,
    )
    keys = sorted(ref)
    assert (got_ann is None) == (ann is None)
    got_ann_list = [0] * len(i) if got_ann is None else got_ann.tolist()
    got_keys = zip(i.tolist(), j.tolist(), got_ann_list, strict=True)
    assert list(got_keys) == keys
    assert i.dtype == j.dtype == np.int32 and table.dtype == float
    assert table.flags.c_contiguous or table.flags.f_contiguous  # rows or columns
    np.testing.assert_allclose(table, np.array([ref[k] for k in keys]).reshape(-1, 4), rtol=1e-12)


@pytest.mark.parametrize(
    ("label", "code"),
    [
        ("model_a", Outcome.A),
        ("A", Outcome.A),
        (" Left ", Outcome.A),
        ("model_b", Outcome.B),
        ("right", Outcome.B),
        ("TIE", Outcome.TIE),
        ("draw", Outcome.TIE),
        ("tie (bothbad)", Outcome.TIE_BOTH_BAD),
        ("both_bad", Outcome.TIE_BOTH_BAD),
        ("bothbad", Outcome.TIE_BOTH_BAD),
    ],
)
def test_outcome_labels(label, code):
    assert parse_outcomes([label])[0] == code


def test_numeric_outcomes():
    np.testing.assert_array_equal(parse_outcomes(np.array([1.0, 0.0, 0.5])), [0, 1, 2])


def test_unknown_label_names_row_and_label():
    with pytest.raises(InputError, match=r"row 3 .*'banana'"):
        parse_outcomes(["model_a", "tie", "banana"], "votes.csv")


def test_numeric_outcome_out_of_range():
    with pytest.raises(InputError, match="0.7"):
        parse_outcomes(np.array([1.0, 0.7]))


def test_self_battle_is_an_error():
    with pytest.raises(InputError, match="battles itself"):
        Battles.from_arrays(["x", "y"], ["y", "y"], ["model_a", "tie"])


@pytest.mark.parametrize("bad", [None, "", "   ", np.nan])
def test_empty_model_name_is_an_error(bad):
    with pytest.raises(InputError, match="empty or missing"):
        Battles.from_arrays(["x", bad], ["y", "z"], ["model_a", "tie"])


def test_negative_weight_is_an_error():
    with pytest.raises(InputError, match="weight"):
        Battles.from_arrays(["x"], ["y"], ["tie"], weight=[-1.0])


def test_filters():
    b = Battles.from_arrays(
        ["a", "a", "b", "c", "a", "d", "b", "c"],
        ["b", "c", "c", "a", "d", "b", "c", "b"],
        ["model_a", "tie (bothbad)", "model_b", "tie", "model_a", "model_b", "tie", "model_a"],
    )
    assert len(b.filter(both_bad="drop")) == 7
    ex = b.filter(exclude_models=["d"])
    assert "d" not in ex.models and len(ex) == 6
    # d has 2 battles: removed at min 3, which leaves a with 3, b with 4, c with 5
    mb = b.filter(min_battles=3)
    assert mb.models == ("a", "b", "c")
    with pytest.raises(InputError, match="unknown model"):
        b.filter(exclude_models=["zzz"])
    with pytest.raises(InputError, match="no battles are left"):
        b.filter(min_battles=100)


def test_pair_counts_from_leaderbot_layout_orients_and_sums():
    c = PairCounts.from_arrays(
        ["a", "b", "c"],
        np.array([[1, 0], [0, 1], [2, 1]]),
        np.array([[3, 1, 2, 1], [1, 1, 0, 0], [5, 0, 0, 0]]),
    )
    d = as_dict(c)
    assert d[(0, 1)] == [1 + 1, 3 + 1, 2, 1]
    assert d[(1, 2)] == [0, 5, 0, 0]
    assert c.n_comparisons == 3 + 1 + 2 + 1 + 2 + 5


def test_pair_counts_bad_input():
    with pytest.raises(InputError, match="against itself"):
        PairCounts.from_arrays(["a", "b"], np.array([[0, 0]]), np.array([[1, 0, 0, 0]]))
    with pytest.raises(InputError, match="outside"):
        PairCounts.from_arrays(["a", "b"], np.array([[0, 5]]), np.array([[1, 0, 0, 0]]))
    with pytest.raises(InputError, match="non-negative"):
        PairCounts.from_arrays(["a", "b"], np.array([[0, 1]]), np.array([[-1, 0, 0, 0]]))


def test_pair_count_filters_match_battle_filters():
    b = Battles.from_arrays(
        ["a", "a", "b", "c", "a", "d", "b", "c"],
        ["b", "c", "c", "a", "d", "b", "c", "b"],
        ["model_a", "tie (bothbad)", "model_b", "tie", "model_a", "model_b", "tie", "model_a"],
    )
    for kwargs in (
        {"both_bad": "drop"},
        {"exclude_models": ["d"]},
        {"min_battles": 3},
        {"exclude_models": ["a"], "min_battles": 2, "both_bad": "drop"},
    ):
        from_battles = b.filter(**kwargs).counts()
        from_counts = b.counts().filter(**kwargs)
        assert from_counts.models == from_battles.models
        assert as_dict(from_counts) == as_dict(from_battles)
    with pytest.raises(InputError, match="no comparisons are left"):
        b.counts().filter(min_battles=100)


def test_disconnected_graph_error_survives_pickling():
    import pickle

    from stablearena.errors import DisconnectedGraphError

    err = pickle.loads(pickle.dumps(DisconnectedGraphError("two parts", [["a"], ["b"]])))
    assert str(err) == "two parts" and err.components == [["a"], ["b"]]


@st.composite
def count_cases(draw: st.DrawFn) -> tuple:
    """Logs for Battles.counts: empty ones, one or two models, few or many models (the dense
    table and the sorted keys), weights with zeros, only both-bad ties, per annotator or not."""
    m = draw(st.sampled_from([1, 2, 3, 5, 40, 700]))
    n = 0 if m == 1 else draw(st.integers(0, 120))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, max(m, 2), n)) % m
    outcomes = draw(st.sampled_from(["all", "both-bad", "decisive"]))
    oc = {
        "all": rng.integers(0, 4, n),
        "both-bad": np.full(n, 3),
        "decisive": rng.integers(0, 2, n),
    }[outcomes].astype(np.int8)
    weighted = draw(st.booleans())
    w = rng.choice([0.0, 0.25, 1.0, 3.0], n) if weighted else None
    n_ann = draw(st.sampled_from([0, 1, 4]))
    ann = rng.integers(0, n_ann, n).astype(np.int32) if n_ann else None
    return m, a, b, oc, w, ann, n_ann


def numpy_counting() -> contextlib.AbstractContextManager:
    """Count as when SciPy's compiled scatter-add cannot be loaded: ``np.bincount`` only."""
    from stablearena.data import battles as battles_module

    return patch.object(battles_module, "coo_todense", lambda: None)


@settings(max_examples=300, deadline=None)
@given(count_cases(), st.booleans())
def test_battles_counts_equal_per_battle_loop(case, compiled):
    """Battles.counts (both counting paths; the dense one with the compiled scatter-add and with
    NumPy alone) equals a per-battle loop: the same rows in (i, j, annotator) order, counts
    equal exactly without weights; empty logs give no rows; calling it again gives the same
    counts after the caller edits the arrays it got (nothing cached is shared)."""
    with contextlib.nullcontext() if compiled else numpy_counting():
        check_counts_against_loop(case)


def check_counts_against_loop(case: tuple) -> None:
    m, a, b, oc, w, ann, n_ann = case
    battles = Battles(
        models=tuple(f"m{k}" for k in range(m)),
        model_a=a.astype(np.int32),
        model_b=b.astype(np.int32),
        outcome=oc,
        weight=w,
        annotator=ann,
        annotators=None if ann is None else tuple(f"r{k}" for k in range(n_ann)),
    )
    ref = reference_rows(m, a, b, oc, w, ann)
    keys = sorted(ref)
    for _ in range(2):
        c = battles.counts(by_annotator=ann is not None)
        got_ann = [0] * len(c.i) if c.annotator is None else c.annotator.tolist()
        assert list(zip(c.i.tolist(), c.j.tolist(), got_ann, strict=True)) == keys
        got = np.column_stack([c.wins, c.losses, c.ties, c.ties_both_bad]).reshape(-1, 4)
        want = np.array([ref[k] for k in keys]).reshape(-1, 4)
        if w is None:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12)
        for x in (c.i, c.j, c.wins, c.losses, c.ties, c.ties_both_bad):
            x[...] = 0  # the caller owns what it got


@pytest.mark.parametrize("m", [1, 2, 5, 724, 725])
def test_fold_positions_are_the_upper_triangle(m):
    from stablearena.data.battles import _fold_positions

    iu, ju = np.triu_indices(m, 1)
    i, j, up, low = _fold_positions(m)
    np.testing.assert_array_equal(i, iu)
    np.testing.assert_array_equal(j, ju)
    np.testing.assert_array_equal(up, iu * 4 * m + ju)  # cells of an m × 4 × m table
    np.testing.assert_array_equal(low, ju * 4 * m + iu)
    assert i.dtype == j.dtype == np.int32
    assert not any(x.flags.writeable for x in (i, j, up, low))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -0.5])
def test_pair_counts_refuse_non_finite_or_negative(bad):
    with pytest.raises(InputError, match="finite and non-negative"):
        PairCounts(
            models=("a", "b"),
            i=np.array([0, 0]),
            j=np.array([1, 1]),
            wins=np.array([1.0, bad]),
            losses=np.zeros(2),
            ties=np.zeros(2),
            ties_both_bad=np.zeros(2),
        )


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
@pytest.mark.parametrize(
    ("a", "b", "outcome", "message"),
    [
        ([0, -1], [1, 0], [0, 1], "outside 0..2"),
        ([0, 3], [1, 0], [0, 1], "outside 0..2"),
        ([0, 2], [1, 2], [0, 1], "battles itself"),
        ([0, 2], [1, 1], [0, -1], "outcome code -1"),
        ([0, 2], [1, 1], [0, 4], "outcome code 4"),
    ],
)
def test_invalid_codes_name_the_row(dtype, a, b, outcome, message):
    """Negative codes are caught by the unsigned maximum as well as too large ones."""
    with pytest.raises(InputError, match=message) as err:
        Battles(
            models=("x", "y", "z"),
            model_a=np.array(a, dtype=dtype),
            model_b=np.array(b, dtype=dtype),
            outcome=np.array(outcome, dtype=np.int8),
        )
    assert "data row 2" in str(err.value)


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(0, 400),
    st.integers(0, 3),
    st.sampled_from([np.int32, np.int64]),
    st.booleans(),
    st.sampled_from([7, 1 << 18]),
    st.integers(0, 2**32 - 1),
)
def test_ordered_table_compiled_equals_bincount(m, n, n_ann, dtype, weighted, chunk, seed):
    """The compiled scatter-add (in chunks of 7 battles too) and the NumPy fallback fill the
    same model_a × outcome × model_b [× annotator] table as a plain ``np.bincount`` over each
    battle's cell (integer counts exactly; weighted sums in the same order, so equal too), for
    int32 and int64 codes."""
    from stablearena._scatter import coo_todense
    from stablearena.data import battles as battles_module
    from stablearena.data.battles import _ordered_table

    assert chunk <= battles_module._CHUNK
    _chunk = patch.object(battles_module, "_CHUNK", chunk)

    assert coo_todense() is not None  # SciPy is a dependency: the compiled path is the one run
    rng = np.random.default_rng(seed)
    a = rng.integers(0, m, n).astype(dtype)
    b = rng.integers(0, m, n).astype(dtype)
    oc = rng.integers(0, 4, n).astype(np.int8)
    ann = rng.integers(0, n_ann, n).astype(np.int32) if n_ann else None
    k = max(n_ann, 1)
    w = rng.choice([0.0, 0.3, 1.0, 2.5], n) if weighted else None
    cell = ((a.astype(np.int64) * 4 + oc) * m + b) * k + (0 if ann is None else ann)
    want = np.bincount(cell, w, minlength=m * m * k * 4)
    for dt in (np.int32, np.int64):
        with _chunk:
            got = _ordered_table(a, b, oc, m, w, ann, k, dt)
        assert got.dtype.kind == ("f" if weighted and n else "i")  # (bincount: ints when empty)
        np.testing.assert_array_equal(got, want)
        with numpy_counting():
            np.testing.assert_array_equal(_ordered_table(a, b, oc, m, w, ann, k, dt), want)


@pytest.mark.parametrize(
    ("column", "row", "value"),
    [("model_a", 0, 3), ("model_b", 0, -1), ("outcome", 2, 4), ("outcome", 0, -2)],
)
def test_counts_refuse_codes_changed_in_place(column, row, value):
    """The compiled kernel does not check bounds: codes written into a validated log's arrays
    after it was built that point outside the table are an InputError, never a write outside
    it."""
    battles = Battles.from_arrays([0, 1, 2] * 50, [1, 2, 0] * 50, [0, 1, 2] * 50, models="xyz")
    getattr(battles, column)[row] = value
    with pytest.raises(InputError, match="changed in place"):
        battles.counts()


def test_compiled_scatter_loads_without_importing_scipy():
    """The kernel is loaded from its file alone: counting imports no SciPy module (start-up stays
    fast), and ``scipy.sparse`` imported afterwards works as usual."""
    code = (
        "import sys\n"
        "from stablearena import Battles\n"
        "from stablearena._scatter import coo_todense\n"
        "b = Battles.from_arrays([0, 1] * 600, [1, 2] * 600, [0, 2] * 600, models='xyz')\n"
        "c = b.counts()\n"
        "assert coo_todense() is not None\n"
        "assert not [k for k in sys.modules if k.startswith('scipy')], sys.modules.keys()\n"
        "import scipy.sparse as sp\n"
        "x = sp.coo_matrix(([1.0, 2.0, 4.0], ([0, 1, 1], [1, 0, 0])), shape=(2, 2)).toarray()\n"
        "assert x.tolist() == [[0, 1], [6, 0]], x\n"
        "print(c.wins.tolist(), c.ties.tolist())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["[600.0,", "0.0]", "[0.0,", "600.0]"]
