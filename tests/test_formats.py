"""Input formats: the one-hot winner layout, standard input, directories and globs as one log,
compressed files, and pair counts streamed batch by batch (equal to the in-memory path)."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from stablearena import MElo
from stablearena.data.battles import Outcome
from stablearena.data.io import read_battles, read_counts, should_stream, sniff

SRC = str(Path(__file__).resolve().parents[1] / "src")
LABELS = np.array(["model_a", "model_b", "tie", "tie (bothbad)"])


def simulated_table(
    n: int, m: int, seed: int, *, judges: int = 0, weights: bool = False
) -> pa.Table:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    strength = np.linspace(1, -1, m)
    p = 1 / (1 + np.exp(strength[b] - strength[a]))
    u = rng.random(n)
    o = np.where(u < 0.1, 2, np.where(u < 0.15, 3, np.where(rng.random(n) < p, 0, 1)))
    names = np.array([f"model-{k:02d}" for k in range(m)])
    cols = {"model_a": names[a], "model_b": names[b], "winner": LABELS[o]}
    if judges:
        cols["judge"] = np.array([f"judge-{k}" for k in rng.integers(0, judges, n)])
    if weights:
        cols["weight"] = rng.uniform(0.5, 2.0, n)
    return pa.table(cols)


def assert_counts_equal(x, y) -> None:
    assert x.models == y.models
    assert x.annotators == y.annotators
    np.testing.assert_array_equal(x.i, y.i)
    np.testing.assert_array_equal(x.j, y.j)
    if x.annotator is not None or y.annotator is not None:
        np.testing.assert_array_equal(x.annotator, y.annotator)
    for name in ("wins", "losses", "ties", "ties_both_bad"):
        np.testing.assert_allclose(getattr(x, name), getattr(y, name), rtol=1e-12, atol=0)


# ---------------------------------------------------------------------------- one-hot
def test_one_hot_winner_layout_of_the_lmsys_preference_data(tmp_path):
    """id, model_a, model_b, prompt, response_a, response_b, winner_model_a, winner_model_b,
    winner_tie — with prompts that hold commas, quotes and newlines."""
    path = tmp_path / "train.csv"
    path.write_text(
        "id,model_a,model_b,prompt,response_a,response_b,winner_model_a,winner_model_b,winner_tie\n"
        '1,gpt-4,claude-2,"say ""hi""\nplease","hi, there",hello,1,0,0\n'
        '2,claude-2,gpt-4,"a, b",x,y,0,1,0\n'
        "3,gpt-4,llama-2,q,x,y,0,0,1\n"
    )
    b = read_battles(path)
    assert b.models == ("claude-2", "gpt-4", "llama-2")
    np.testing.assert_array_equal(b.outcome, [Outcome.A, Outcome.B, Outcome.TIE])
    assert b.prompts is not None and len(b.prompts) == 3  # the 'prompt' column, newlines intact


def test_one_hot_booleans_in_parquet_and_explicit_winner_wins(tmp_path):
    t = pa.table(
        {
            "model_a": ["a", "b"],
            "model_b": ["b", "a"],
            "winner_model_a": [True, False],
            "winner_model_b": [False, False],
            "winner_tie": [False, True],
            "verdict": ["model_b", "model_b"],
        }
    )
    path = tmp_path / "votes.parquet"
    pq.write_table(t, path)
    np.testing.assert_array_equal(read_battles(path).outcome, [Outcome.A, Outcome.TIE])
    explicit = read_battles(path, columns={"winner": "verdict"})
    np.testing.assert_array_equal(explicit.outcome, [Outcome.B, Outcome.B])


# ---------------------------------------------------------------------------- standard input
def _run(args, stdin: bytes) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stablearena", *args],
        input=stdin,
        capture_output=True,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


@pytest.mark.parametrize("kind", ["csv", "gzip-csv", "jsonl", "json", "parquet", "tsv"])
def test_standard_input_in_every_format(tmp_path, kind):
    t = simulated_table(300, 5, 1)
    if kind in ("csv", "gzip-csv", "tsv"):
        buf = io.BytesIO()
        pacsv.write_csv(t, buf, pacsv.WriteOptions(delimiter="\t" if kind == "tsv" else ","))
        data = buf.getvalue().replace(b'"', b"")
        data = gzip.compress(data) if kind == "gzip-csv" else data
    elif kind == "jsonl":
        data = "".join(json.dumps(r) + "\n" for r in t.to_pylist()).encode()
    elif kind == "json":
        data = json.dumps(t.to_pylist()).encode()
    else:
        buf = io.BytesIO()
        pq.write_table(t, buf)
        data = buf.getvalue()
    out = _run(["rank", "-", "-f", "json"], data)
    assert out.returncode == 0, out.stderr.decode()
    payload = json.loads(out.stdout)
    assert payload["source"] == "<stdin>" and payload["n_battles"] == 300
    path = tmp_path / "same.parquet"
    pq.write_table(t, path)
    assert (
        payload["models"]
        == json.loads(_run(["rank", str(path), "-f", "json"], b"").stdout)["models"]
    )


def test_standard_input_empty_is_one_line():
    out = _run(["rank", "-"], b"")
    assert out.returncode == 2 and out.stderr.decode().count("\n") == 1
    assert "standard input is empty" in out.stderr.decode()


# ---------------------------------------------------------------------------- directories and globs
@pytest.fixture
def log_dir(tmp_path):
    """A directory of CSV, gzip-CSV, Parquet and JSON Lines parts, plus Spark-style markers."""
    d = tmp_path / "log"
    (d / "day=2").mkdir(parents=True)
    parts = [simulated_table(4000, 12, s, judges=7, weights=True) for s in range(4)]
    pacsv.write_csv(parts[0], d / "part-0.csv")
    buf = io.BytesIO()
    pacsv.write_csv(parts[1], buf)
    (d / "part-1.csv.gz").write_bytes(gzip.compress(buf.getvalue()))
    pq.write_table(parts[2], d / "day=2" / "part-2.parquet", row_group_size=1000)
    (d / "part-3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in parts[3].to_pylist()))
    (d / "_SUCCESS").write_text("")
    (d / ".part-0.csv.crc").write_text("x")
    # the whole log in the order the directory is read (sorted paths: day=2/… first)
    return d, pa.concat_tables([parts[2], parts[0], parts[1], parts[3]]), parts


def test_directory_is_one_log_in_memory_and_streamed(log_dir, tmp_path):
    d, whole, _ = log_dir
    single = tmp_path / "whole.parquet"
    pq.write_table(whole, single)
    reference = read_battles(single)
    combined = read_battles(d)
    assert len(combined) == 16000 and combined.models == reference.models
    assert combined.annotators == reference.annotators
    assert_counts_equal(combined.counts(), reference.counts())
    streamed = read_counts(d)
    assert_counts_equal(streamed, reference.counts())
    assert_counts_equal(read_counts(d, by_annotator=True), reference.counts(by_annotator=True))
    assert should_stream(d) and not should_stream(single)
    np.testing.assert_allclose(
        MElo().fit(streamed).ratings, MElo().fit(reference).ratings, atol=1e-9
    )


def test_glob_selects_files(log_dir, cli):
    d, _, parts = log_dir
    weight = [float(np.sum(p["weight"].to_numpy())) for p in parts]
    code, out, err = cli("rank", str(d / "*.csv*"), "-f", "json")
    assert code == 0, err
    assert json.loads(out)["n_battles"] == round(weight[0] + weight[1])
    code, out, err = cli("rank", str(d / "**" / "*.parquet"), "-f", "json")
    assert code == 0 and json.loads(out)["n_battles"] == round(weight[2])


@pytest.mark.parametrize("method", ["m-elo", "bt", "am-elo", "davidson", "elo"])
def test_cli_directory_every_method_agrees_with_the_single_file(log_dir, tmp_path, cli, method):
    d, whole, _ = log_dir
    single = tmp_path / "whole.parquet"
    pq.write_table(whole, single)
    code, a, err = cli("rank", str(d), "-m", method, "-f", "json")
    assert code == 0, err
    code, b, err = cli("rank", str(single), "-m", method, "-f", "json")
    assert code == 0, err
    ra = {m["model"]: m["rating"] for m in json.loads(a)["models"]}
    rb = {m["model"]: m["rating"] for m in json.loads(b)["models"]}
    assert ra.keys() == rb.keys()
    assert max(abs(ra[k] - rb[k]) for k in ra) < 1e-6


def test_streamed_counts_report_file_and_row(tmp_path, monkeypatch):
    """A bad row deep in a streamed file is named by file and row (batches are offset)."""
    import stablearena.data.io as sio

    monkeypatch.setattr(sio, "BATCH_ROWS", 1000)
    d = tmp_path / "log"
    d.mkdir()
    t = simulated_table(5000, 6, 3)
    winners = t["winner"].to_pylist()
    winners[3456] = "maybe"
    pq.write_table(
        t.set_column(2, "winner", pa.array(winners)), d / "b.parquet", row_group_size=700
    )
    pq.write_table(simulated_table(100, 6, 4), d / "a.parquet")
    with pytest.raises(Exception, match=r"b\.parquet: data row 3457 .*'maybe'"):
        read_counts(d)


def test_streaming_memory_does_not_hold_the_battles(tmp_path, monkeypatch):
    """The accumulator keeps (pair × annotator) cells, not battles: its rows stay bounded by the
    number of distinct cells while many batches stream through."""
    import stablearena.data.io as sio

    monkeypatch.setattr(sio, "BATCH_ROWS", 500)
    monkeypatch.setattr(sio._CountAccumulator, "MERGE_ROWS", 64)
    path = tmp_path / "big.parquet"
    pq.write_table(simulated_table(60_000, 8, 5), path, row_group_size=500)
    seen = []
    real = sio._CountAccumulator.add

    def spy(self, *args):
        real(self, *args)
        seen.append(sum(len(k) for k in self.keys))

    monkeypatch.setattr(sio._CountAccumulator, "add", spy)
    counts = read_counts(path)
    assert len(seen) == 120
    # merged whenever the appended rows pass max(4 × merged, MERGE_ROWS): bounded by the 28 pairs
    assert max(seen) <= 4 * 28 + 2 * 28
    assert counts.n_comparisons == 60_000


# ---------------------------------------------------------------------------- compression and sniffing
@pytest.mark.parametrize(
    ("suffix", "compress"),
    [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress), ("", gzip.compress)],
)
def test_compressed_csv(tmp_path, suffix, compress):
    t = simulated_table(500, 4, 9)
    buf = io.BytesIO()
    pacsv.write_csv(t, buf)
    path = tmp_path / f"votes.csv{suffix}"
    path.write_bytes(compress(buf.getvalue()))
    assert len(read_battles(path)) == 500
    assert read_counts(path).n_comparisons == 500


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"PAR1xxxx", "parquet"),
        (b"\x1f\x8b\x08\x00", "gzip"),
        (b"PK\x03\x04[Content_Types].xml xl/", "xlsx"),
        (b"PK\x03\x04data.csv", "zip"),
        (b"\xff\xfem\x00", "utf16"),
        (b'[{"a": 1}]', "json"),
        (b'{"a": 1}\n{"a": 2}\n', "jsonl"),
        (b'{"models": []}', "json"),
        (b"a,b\n1,2\n", "csv"),
        (b"\x00\x01\x02\x03", "binary"),
        (b"  \n", "empty"),
        (b"SQLite format 3\x00", "sqlite"),
    ],
)
def test_sniff_says_what_a_file_is(head, kind):
    assert sniff(head) == kind


def test_semicolon_and_tab_separated_files_are_recognised(tmp_path):
    for sep, name in ((";", "votes.csv"), ("\t", "votes.csv"), ("\t", "votes.txt")):
        path = tmp_path / name
        path.write_text(
            sep.join(["model_a", "model_b", "winner"]) + "\n" + sep.join(["a", "b", "tie"]) + "\n"
        )
        assert read_battles(path).models == ("a", "b")
