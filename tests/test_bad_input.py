"""Every class of bad input gets one line naming the file, the row or field, the value and what to
do, and exit code 2 — or a documented finite answer. Never a traceback, a Python warning, an
internal error (exit 1), NaN/inf in the output or a silently wrong answer."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stablearena.data.io import read_battles, read_counts, sniff
from stablearena.errors import InputError

GOOD = "model_a,model_b,winner\n" + "a,b,model_a\nb,c,tie\nc,a,model_b\nb,a,model_a\nc,b,model_b\n"
METHODS = ["m-elo", "bt", "elo", "am-elo", "rao-kupper", "davidson", "bt-cov"]


def one_error(code: int, out: str, err: str, *fragments: str) -> None:
    """Exit 2, nothing on stdout, exactly one error line holding every fragment, no noise."""
    assert code == 2, err
    assert out == ""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for f in fragments:
        assert f in lines[0], (f, lines[0])
    for noise in ("Traceback", "RuntimeWarning", "internal error"):
        assert noise not in err


def parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def zip_bytes(**members: str) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, text in members.items():
            z.writestr(name, text)
    return buf.getvalue()


_GZ = gzip.compress(GOOD.encode() * 1)
_PQ = parquet_bytes(
    pa.table({"model_a": ["a", "b"], "model_b": ["b", "a"], "winner": ["model_a", "tie"]})
)

# (file name, content, fragments the one error line must contain)
FILE_CASES = [
    # what a file really is
    ("votes.csv", b"", ["votes.csv", "empty"]),
    ("votes.csv", b"\xef\xbb\xbf\n", ["empty"]),
    ("votes.csv", bytes(range(256)) * 20, ["binary", "not CSV"]),
    ("votes.parquet", bytes(range(256)) * 20, ["binary data", "not PARQUET"]),
    ("votes.csv", _PQ, ["binary", "Parquet", "rename it .parquet"]),
    ("votes.parquet", GOOD.encode(), ["not a valid Parquet", "CSV text"]),
    ("votes.csv", zip_bytes(**{"votes.csv": GOOD}), ["ZIP archive", "unzip"]),
    (
        "votes.xlsx",
        zip_bytes(**{"[Content_Types].xml": "<x/>", "xl/workbook.xml": "<x/>"}),
        ["Excel", "export the sheet as CSV"],
    ),
    ("votes.csv", b"%PDF-1.4\n" + bytes(100), ["PDF"]),
    ("votes.csv", b"SQLite format 3\x00" + bytes(100), ["SQLite"]),
    ("votes.csv", GOOD.encode("utf-16"), ["UTF-16", "save it as UTF-8"]),
    (
        "votes.csv",
        "model_a,model_b,winner\ncafé,thé,model_a\n".encode("latin-1"),
        ["not UTF-8", "UTF-8", "column 'model_a'", "caf"],
    ),
    (  # a bad byte in a later column and row: named too (UTF-8 is checked per distinct value)
        "votes.csv",
        "model_a,model_b,winner\nx,y,model_a\nx,y,modèl_b\n".encode("latin-1"),
        ["not UTF-8", "column 'winner'", "mod"],
    ),
    ("votes.xyz", GOOD.encode(), ["cannot tell the format", ".xyz", "--input-format"]),
    # compressed, corrupt or truncated
    ("votes.csv.gz", _GZ[: len(_GZ) // 2], ["gzip", "corrupt or truncated"]),
    ("votes.csv.gz", _GZ[:12] + bytes(30) + _GZ[42:], ["gzip", "corrupt or truncated"]),
    ("votes.csv.bz2", bz2.compress(GOOD.encode())[:40], ["bzip2", "corrupt or truncated"]),
    ("votes.csv.xz", lzma.compress(GOOD.encode())[:40], ["xz", "corrupt or truncated"]),
    ("votes.json.gz", gzip.compress(b'[{"model_a": "a"}]')[:15], ["gzip", "corrupt or truncated"]),
    ("votes.csv.bz2", _GZ, ["gzip-compressed", "not bzip2"]),
    ("votes.csv.gz", GOOD.encode(), ["gzip-compressed", "content is CSV text"]),
    ("votes.parquet", _PQ[: len(_PQ) // 2], ["not a valid Parquet", "truncated or corrupt"]),
    # CSV structure
    ("votes.csv", b"model_a,model_b,winner\n", ["empty (no data rows)"]),
    ("votes.csv", b"foo,bar\n1,2\n", ["no column for model_a", "The columns are: foo, bar"]),
    (
        "votes.csv",
        b"model_a,model_b,winner,winner\na,b,model_a,tie\n",
        ["'winner' appears 2 times"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner\na,b,model_a\nb,a,model_b,x\n",
        ["not a readable CSV", "Expected 3 columns"],
    ),
    # names and outcomes
    (
        "votes.csv",
        b"model_a,model_b,winner\na,b,model_a\n,a,model_b\n",
        ["data row 2", "model name is empty"],
    ),
    ("votes.csv", b"model_a,model_b,winner\na,b,model_a\n   ,a,tie\n", ["data row 2", "empty"]),
    (
        "votes.csv",
        b"model_a,model_b,winner\na,b,model_a\na, a,tie\n",
        ["data row 2", "'a' battles itself"],
    ),
    ("votes.csv", b"model_a,model_b,winner\na,b,maybe\n", ["data row 1", "'maybe'", "Accepted"]),
    ("votes.csv", b"model_a,model_b,winner\na,b,\n", ["data row 1", "outcome is empty"]),
    ("votes.csv", b"model_a,model_b,winner\na,b,0.3\n", ["data row 1", "'0.3'"]),
    (
        "votes.parquet",
        parquet_bytes(
            pa.table({"model_a": [[1], [2]], "model_b": ["b", "a"], "winner": ["tie", "tie"]})
        ),
        ["holds lists, not names"],
    ),
    (
        "votes.parquet",
        parquet_bytes(
            pa.table({"model_a": [1.5, 2.0], "model_b": [2.0, 1.0], "winner": ["tie", "tie"]})
        ),
        ["data row 1", "the number 1.5"],
    ),
    (
        "votes.parquet",
        parquet_bytes(
            pa.table({"model_a": ["a", "b"], "model_b": ["b", "a"], "winner": [True, False]})
        ),
        ["boolean"],
    ),
    # one-hot outcome columns
    (
        "votes.csv",
        b"model_a,model_b,winner_model_a,winner_model_b,winner_tie\na,b,1,1,0\n",
        ["data row 1", "winner_model_a and winner_model_b are all 1", "exactly one"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner_model_a,winner_model_b,winner_tie\na,b,0,0,0\n",
        ["data row 1", "none of the one-hot columns"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner_model_a,winner_model_b,winner_tie\na,b,2,0,0\n",
        ["data row 1", "'winner_model_a' is 2.0"],
    ),
    # weights and timestamps
    (
        "votes.csv",
        b"model_a,model_b,winner,weight\na,b,model_a,nan\nb,a,tie,1\n",
        ["data row 1", "weight", "not a finite number"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner,weight\na,b,model_a,inf\nb,a,tie,1\n",
        ["data row 1", "not a finite number"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner,weight\na,b,model_a,-1\nb,a,tie,1\n",
        ["data row 1", "weight -1.0"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner,weight\na,b,model_a,abc\nb,a,tie,1\n",
        ["data row 1", "'abc' is not a number"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner,weight\na,b,model_a,1e-300\nb,a,tie,1\n",
        ["data row 1", "too small to count", "set such weights to 0"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner,weight\na,b,model_a,1e300\nb,a,tie,1e300\n",
        ["sum to 2e+300", "rescale"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner,weight\na,b,model_a,1e308\nb,a,tie,1e308\n",
        ["sum past the largest", "rescale"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner,weight\na,b,model_a,1e-9\nb,a,tie,1e-9\n",
        ["sum to 2e-09", "less than one"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner,weight\na,b,model_a,0\nb,a,tie,0\n",
        ["no comparisons that count"],
    ),
    (
        "votes.csv",
        b"model_a,model_b,winner,tstamp\na,b,model_a,abc\nb,a,tie,1\n",
        ["data row 1", "timestamp", "'abc'"],
    ),
    # JSON shapes and types
    ("votes.json", b"[" * 100_000 + b"]" * 100_000, ["nested too deeply"]),
    ("votes.json", b"42", ["JSON must be a list of battle records", "found int"]),
    ("votes.json", b"[1, 2]", ["record 1 is int"]),
    ("votes.json", b"[]", ["empty"]),
    (
        "votes.json",
        b'[{"model_a": {"x": 1}, "model_b": "b", "winner": "model_a"}]',
        ["data row 1", "field 'model_a' is dict"],
    ),
    (
        "votes.json",
        b'[{"model_a": "a", "model_b": "b", "winner": "model_a", "weight": NaN}]',
        ["NaN, which is not a number"],
    ),
    (
        "votes.json",
        b'{"model_a": ["a", "b"], "model_b": ["b"], "winner": ["tie", "tie"]}',
        ["equal lengths"],
    ),
    (
        "votes.json",
        b'{"model_a": "a"}\n{"model_a": "b"}\n',
        ["It looks like JSON Lines", "rename it .jsonl"],
    ),
    (
        "votes.jsonl",
        b'{"model_a": "a", "model_b": "b", "winner": "tie"}\n{"model_a": 3, "model_b": "a", "winner": "tie"}\n',
        ["not valid JSON Lines", "changed from string to number"],
    ),
    # leaderbot pair counts: names, shapes, types, values
    (
        "pairs.json",
        json.dumps(
            {"models": ["a", "a", "c"], "X": [[0, 1], [1, 2]], "Y": [[1, 1, 1], [1, 1, 1]]}
        ).encode(),
        ["model 'a' is listed twice", "models[0] and models[1]"],
    ),
    (
        "pairs.json",
        json.dumps(
            {"models": ["a", " ", "c"], "X": [[0, 1], [1, 2]], "Y": [[1, 1, 1], [1, 1, 1]]}
        ).encode(),
        ["models[1] is an empty name"],
    ),
    (
        "pairs.json",
        json.dumps({"models": [["a"], "b"], "X": [[0, 1]], "Y": [[1, 1, 1]]}).encode(),
        ['models[0] is ["a"]', "not a model name"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 1, 1]], "Y": [[1, 1, 1]]}).encode(),
        ["X[0] is [0, 1, 1]", "two whole-number"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0.5, 1]], "Y": [[1, 1, 1]]}).encode(),
        ["X[0]", "whole-number"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 2]], "Y": [[1, 1, 1]]}).encode(),
        ["outside 0..1"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[1, 1]], "Y": [[1, 1, 1]]}).encode(),
        ["'b' against itself"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 1]], "Y": [[1, 1]]}).encode(),
        ["Y[0] is [1, 1]", "3 or 4 counts"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 1]], "Y": [["1", 1, 1]]}).encode(),
        ['Y[0] holds "1"'],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 1]], "Y": [[True, 1, 1]]}).encode(),
        ["Y[0] holds true"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 1]], "Y": [[-1, 1, 1]]}).encode(),
        ["Y[0] holds -1"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 1]], "Y": [[1e300, 1, 1]]}).encode(),
        ["sum to 1e+300", "rescale"],
    ),
    (
        "pairs.json",
        json.dumps(
            {"models": ["a", "b", "c"], "X": [[0, 1], [1, 2]], "Y": [[1e-300, 0, 0], [5, 5, 5]]}
        ).encode(),
        ["pair row 0", "too few to count"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 1]], "Y": [[0, 0, 0]]}).encode(),
        ["no comparisons", "nothing to rate"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 1]]}).encode(),
        ["needs models, X and Y", "Y missing"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b"], "X": [[0, 1], [0, 1]], "Y": [[1, 1, 1]]}).encode(),
        ["'X' has 2 pairs but 'Y' has 1"],
    ),
    (
        "pairs.json",
        json.dumps({"models": ["a", "b", "c"], "X": [[0, 1]], "Y": [[1, 1, 1]]}).encode(),
        ["no comparisons that count (c)"],
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "fragments"),
    FILE_CASES,
    ids=[f"{k}-{c[0]}-{c[2][0][:30]}" for k, c in enumerate(FILE_CASES)],
)
def test_bad_file_is_one_line_exit_2(tmp_path, cli, name, content, fragments):
    path = tmp_path / name
    path.write_bytes(content)
    one_error(*cli("rank", str(path)), name, *fragments)


# ---------------------------------------------------------------------------- graphs, every method
DISCONNECTED = "model_a,model_b,winner\na,b,model_a\nb,a,tie\nc,d,model_a\nd,c,tie\n"
ZERO_WEIGHT = "model_a,model_b,winner,weight\na,b,model_a,0\nb,a,tie,0\n"


@pytest.mark.parametrize("method", METHODS)
def test_disconnected_graph_is_refused_by_every_method(tmp_path, cli, method):
    path = tmp_path / "votes.csv"
    path.write_text(DISCONNECTED)
    one_error(
        *cli("rank", str(path), "-m", method), "votes.csv", "disconnected components", "{a, b}"
    )


@pytest.mark.parametrize("method", METHODS)
def test_all_zero_weights_are_refused_by_every_method(tmp_path, cli, method):
    path = tmp_path / "votes.csv"
    path.write_text(ZERO_WEIGHT)
    one_error(*cli("rank", str(path), "-m", method), "votes.csv")


@pytest.mark.parametrize("method", METHODS)
def test_empty_log_is_refused_by_every_method(tmp_path, cli, method):
    path = tmp_path / "votes.csv"
    path.write_text("model_a,model_b,winner\n")
    one_error(*cli("rank", str(path), "-m", method), "votes.csv", "empty")


def test_online_elo_library_warns_on_a_disconnected_log():
    """The library's online Elo rates any log (a documented finite answer) but says so."""
    from stablearena import Battles, StableArenaWarning
    from stablearena.raters.elo import Elo

    b = Battles.from_arrays(
        ["a", "b", "c", "d"], ["b", "a", "d", "c"], ["model_a", "tie", "model_a", "tie"]
    )
    with pytest.warns(StableArenaWarning, match="disconnected"):
        fitted = Elo().fit(b)
    assert any("not comparable" in n for n in fitted.notes)
    assert np.all(np.isfinite(fitted.ratings))


@pytest.mark.parametrize("ci", ["fisher", "sandwich", "bootstrap"])
def test_all_ties_log_gives_equal_ratings_and_full_rank_intervals(tmp_path, cli, ci):
    """Every comparison a tie: m-ELO's answer is equal ratings; every interval method gives
    zero-width rating intervals (the outcome scores have no variance) and rank intervals that
    span every tied model (documented finite answer, not an error)."""
    path = tmp_path / "ties.csv"
    path.write_text("model_a,model_b,winner\n" + "a,b,tie\nb,c,tie\nc,a,tie\n" * 10)
    code, out, err = cli("rank", str(path), "--ci", ci, "--rounds", "30", "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    assert {m["rating"] for m in payload["models"]} == {1000.0}
    assert all((m["rank_low"], m["rank_high"]) == (1, 3) for m in payload["models"])
    assert all(m["tier"] == 1 and m["displayed_rank"] == 1 for m in payload["models"])


@pytest.mark.parametrize("method", ["rao-kupper", "davidson"])
def test_tie_models_on_all_ties_say_what_to_do(tmp_path, cli, method):
    path = tmp_path / "ties.csv"
    path.write_text("model_a,model_b,winner\n" + "a,b,tie\nb,c,tie\nc,a,tie\n")
    one_error(*cli("rank", str(path), "-m", method), "every comparison is a tie")


# ---------------------------------------------------------------------------- options
OPTION_CASES = [
    (["rank", "--level", "nan"], ["--level", "strictly between 0 and 1", "nan"]),
    (["rank", "--level", "1"], ["--level"]),
    (["rank", "--rounds", "1", "--ci", "bootstrap"], ["--rounds", "2"]),
    (["rank", "--seed", "-1"], ["--seed", "0 to 2**63"]),
    (["rank", "--elo-k", "inf", "-m", "elo"], ["--elo-k", "finite"]),
    (["rank", "--elo-k", "0", "-m", "elo"], ["--elo-k", "> 0"]),
    (["rank", "--shuffles", "-3", "-m", "elo"], ["--shuffles"]),
    (["rank", "--confidence", "1.5", "-m", "am-elo"], ["--confidence"]),
    (["rank", "--ability-threshold", "nan", "-m", "am-elo"], ["--ability-threshold", "finite"]),
    (["rank", "--k-cov", "-2", "-m", "davidson"], ["--k-cov", "≥ 0"]),
    (["rank", "--k-cov", "two", "-m", "davidson"], ["--k-cov", "'two'"]),
    (["rank", "-m", "glicko"], ["unknown --method 'glicko'", "m-elo"]),
    (["rank", "-f", "xml"], ["--format must be one of table, json, csv"]),
    (["rank", "--both-bad", "keep"], ["--both-bad"]),
    (["rank", "--input-format", "xls"], ["--input-format"]),
    (["rank", "--anchor", "aurora-70b=nan"], ["anchor", "MODEL=RATING"]),
    (["rank", "--anchor", "nobody=1200"], ["'nobody'", "not among"]),
    (["rank", "--exclude", "nobody"], ["cannot exclude unknown model"]),
    (["rank", "--min-battles", "100000"], ["no battles are left after filtering"]),
    (["rank", "--min-battles", "-1"], ["--min-battles", "≥ 0"]),
    (["rank", "--col", "model_a"], ["--col 'model_a' must look like ROLE=NAME"]),
    (["rank", "--col", "colour=x"], ["unknown column role"]),
    (["rank", "--cluster", "annotator"], ["--cluster applies to the bootstrap"]),
    (["rank", "--no-such-option"], ["No such option: --no-such-option", "stablearena rank --help"]),
    (["rank", "a", "b"], ["unexpected extra argument", "stablearena rank --help"]),
    (
        ["experiment", "perturbation", "--simulate", "--thresholds", "nan"],
        ["--thresholds", "finite"],
    ),
    (["experiment", "coverage", "--models", "99999999999999999999"], ["--models", "100,000"]),
    (["next-pairs", "-k", "0"], ["-k", "1"]),
    (["next-pairs", "--seed", "-5"], ["--seed"]),
    (["compare", "--test-ratio", "nan"], ["test_ratio"]),
]


@pytest.mark.parametrize(
    ("args", "fragments"), OPTION_CASES, ids=[" ".join(a) for a, _ in OPTION_CASES]
)
def test_bad_option_is_one_line_exit_2(cli, args, fragments):
    one_error(*cli(*args), *fragments)


def test_usage_error_is_one_line_not_a_box(cli):
    code, out, err = cli("rank", "--methd", "bt")
    one_error(code, out, err, "No such option")
    assert "╭" not in err and "Usage:" not in err


def test_markup_like_text_is_printed_literally(tmp_path, cli):
    """Messages and hints are never read as Rich markup ('[plot]' must stay visible)."""
    path = tmp_path / "[bold]votes[plot].csv"
    path.write_text("model_a,model_b,winner\n[x],[y],maybe\n")
    code, out, err = cli("rank", str(path))
    one_error(code, out, err, "[bold]votes[plot].csv", "'maybe'")


def test_missing_optional_dependency_is_found_before_the_work(cli, monkeypatch, tmp_path):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    code, out, err = cli(
        "experiment", "selection", "--simulate", "5", "--plot", str(tmp_path / "f.png")
    )
    one_error(code, out, err, "--plot needs matplotlib", "stablearena[plot]")


def test_prediction_experiment_error_names_the_prediction_experiment(tmp_path, cli):
    path = tmp_path / "votes.csv"
    path.write_text(GOOD)
    one_error(*cli("experiment", "prediction", str(path)), "the prediction experiment", "annotator")


def test_stdin_that_is_empty_or_a_terminal(cli, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"")))
    one_error(*cli("rank", "-"), "standard input is empty")


# ---------------------------------------------------------------------------- fuzzing the readers
_ALLOWED_EXIT = {0, 2}


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    st.binary(max_size=400)
    | st.text(alphabet=st.sampled_from(list("ab,\n\"' \t;{}[]:0.5-eE\\x")), max_size=300).map(
        str.encode
    )
    | st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "", " ", "a ", "ü", "1", "nan"]),
            st.sampled_from(["a", "b", "c", "", "d"]),
            st.sampled_from(
                ["model_a", "model_b", "tie", "", "1", "0", "0.5", "x", "tie (bothbad)"]
            ),
            st.sampled_from(["1", "0", "-1", "nan", "inf", "1e-300", "1e300", "", "2", "x"]),
        ),
        max_size=12,
    ).map(
        lambda rows: (
            "model_a,model_b,winner,weight\n" + "".join(",".join(r) + "\n" for r in rows)
        ).encode()
    ),
    st.sampled_from(
        ["votes.csv", "votes.json", "votes.jsonl", "votes.parquet", "votes.csv.gz", "votes"]
    ),
)
def test_fuzzed_files_never_crash_the_cli(tmp_path_factory, cli, content, name):
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_bytes(content)
    code, out, err = cli("rank", str(path), "-f", "json")
    assert code in _ALLOWED_EXIT, err
    assert "Traceback" not in err and "internal error" not in err and "RuntimeWarning" not in err
    if code == 0:
        payload = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in the output"))
        assert all(np.isfinite(m["rating"]) for m in payload["models"])
    else:
        assert len([ln for ln in err.splitlines() if ln.startswith("error: ")]) == 1


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=300))
def test_sniff_never_fails_and_reader_errors_are_input_errors(data):
    kind = sniff(data)
    assert isinstance(kind, str) and kind
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "x.csv"
        p.write_bytes(data)
        for reader in (read_battles, read_counts):
            try:
                reader(p)
            except InputError:
                pass


def test_groups_joined_only_by_tiny_weights_are_not_falsely_precise(tmp_path, cli):
    """Two groups joined by battles of weight 1e-11 (within the allowed range): the information
    intervals are honestly enormous, and the bootstrap — whose resamples cannot draw 2e-11 of a
    battle, so every resample is disconnected — refuses instead of reporting the full-data gap as
    certain."""
    rows = ["model_a,model_b,winner,weight"]
    rows += ["a,b,model_a,1", "b,a,model_a,1", "c,d,tie,1", "d,c,model_b,1"] * 50
    rows += ["b,c,model_a,1e-11", "c,b,model_a,1e-11"]
    path = tmp_path / "bridge.csv"
    path.write_text("\n".join(rows) + "\n")
    code, out, err = cli("rank", str(path), "--ci", "fisher", "-f", "json")
    assert code == 0, err
    assert min(m["se"] for m in json.loads(out)["models"]) > 1e6
    one_error(
        *cli("rank", str(path), "--ci", "bootstrap", "--rounds", "40"),
        "bridge.csv",
        "40 of 40 bootstrap resamples left a model without a rating",
    )
