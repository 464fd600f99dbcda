"""Readers: every format, column detection and mapping, and every bad-input case."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from stablearena import Battles, InputError, MElo, PairCounts
from stablearena.data.io import read_battles

ROWS = pd.DataFrame(
    {
        "model_a": ["gpt", "claude", "gpt", "llama", "claude", "llama"],
        "model_b": ["claude", "llama", "llama", "gpt", "gpt", "claude"],
        "winner": ["model_a", "tie", "model_b", "tie (bothbad)", "model_a", "model_b"],
        "judge": ["u1", "u2", "u1", "u3", "u2", "u1"],
        "question_id": ["q1", "q1", "q2", "q2", "q3", "q3"],
        "tstamp": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    }
)


def check(b: Battles | PairCounts) -> None:
    assert isinstance(b, Battles)
    assert b.models == ("claude", "gpt", "llama")
    assert len(b) == 6
    assert b.annotators == ("u1", "u2", "u3")
    assert b.prompts == ("q1", "q2", "q3")
    np.testing.assert_array_equal(b.outcome, [0, 2, 1, 3, 0, 1])
    np.testing.assert_array_equal(b.timestamp, ROWS.tstamp)


def test_dataframe():
    check(read_battles(ROWS))


def test_csv(tmp_path):
    p = tmp_path / "votes.csv"
    ROWS.to_csv(p, index=False)
    check(read_battles(p))


def test_csv_gz(tmp_path):
    p = tmp_path / "votes.csv.gz"
    ROWS.to_csv(p, index=False, compression="gzip")
    check(read_battles(p))


def test_jsonl(tmp_path):
    p = tmp_path / "votes.jsonl"
    ROWS.to_json(p, orient="records", lines=True)
    check(read_battles(p))


def test_parquet(tmp_path):
    p = tmp_path / "votes.parquet"
    ROWS.to_parquet(p)
    check(read_battles(p))


def test_fastchat_json_records(tmp_path):
    p = tmp_path / "clean_battle.json"
    p.write_text(json.dumps(ROWS.to_dict(orient="records")))
    check(read_battles(p))


def test_leaderbot_pair_counts(tmp_path):
    p = tmp_path / "pairs.json"
    p.write_text(
        json.dumps(
            {"models": ["a", "b", "c"], "X": [[0, 1], [1, 2]], "Y": [[3, 1, 2, 1], [0, 4, 1, 0]]}
        )
    )
    c = read_battles(p)
    assert isinstance(c, PairCounts)
    assert c.n_comparisons == 12


def test_llmfao_shape_detected():
    df = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "prompt": ["p1", "p1", "p2"],
            "model_x": [5, 6, 7],
            "model_y": [6, 7, 5],
            "worker": ["w1", "w2", "w1"],
            "winner": ["left", "tie", "right"],
            "left": ["A", "B", "C"],
            "right": ["B", "C", "A"],
        }
    )
    b = read_battles(df)
    assert b.models == ("A", "B", "C")
    np.testing.assert_array_equal(b.outcome, [0, 2, 1])
    assert b.annotators == ("w1", "w2")


def test_explicit_column_mapping():
    df = ROWS.rename(columns={"model_a": "first", "model_b": "second", "winner": "verdict"})
    b = read_battles(df, columns={"model_a": "first", "model_b": "second", "winner": "verdict"})
    check(b)


def test_weights_and_numeric_outcomes():
    df = pd.DataFrame(
        {"model_a": ["a", "b"], "model_b": ["b", "a"], "winner": [1.0, 0.5], "weight": [2.0, 0.5]}
    )
    b = read_battles(df)
    np.testing.assert_array_equal(b.outcome, [0, 2])
    np.testing.assert_array_equal(b.weight, [2.0, 0.5])


def test_names_are_trimmed():
    df = pd.DataFrame(
        {"model_a": [" a", "b "], "model_b": ["b", "a"], "winner": ["model_a", "model_b"]}
    )
    assert read_battles(df).models == ("a", "b")


# ------------------------------------------------------------------ bad input
def test_missing_columns_lists_existing():
    df = pd.DataFrame({"foo": ["a"], "bar": ["b"], "winner": ["tie"]})
    with pytest.raises(
        InputError, match="no column for model_a, model_b.*The columns are: foo, bar, winner"
    ):
        read_battles(df)


def test_mapping_to_absent_column():
    with pytest.raises(InputError, match="'nope'.*does not exist"):
        read_battles(ROWS, columns={"model_a": "nope"})


def test_unknown_label_names_row(tmp_path):
    p = tmp_path / "votes.csv"
    bad = ROWS.copy()
    bad.loc[4, "winner"] = "maybe"
    bad.to_csv(p, index=False)
    with pytest.raises(InputError, match=r"votes.csv: data row 5 .*'maybe'"):
        read_battles(p)


def test_self_battle(tmp_path):
    p = tmp_path / "votes.csv"
    bad = ROWS.copy()
    bad.loc[2, "model_b"] = "gpt"
    bad.to_csv(p, index=False)
    with pytest.raises(InputError, match="row 3.*'gpt' battles itself"):
        read_battles(p)


def test_empty_name(tmp_path):
    p = tmp_path / "votes.csv"
    bad = ROWS.copy()
    bad.loc[1, "model_a"] = None
    bad.to_csv(p, index=False)
    with pytest.raises(InputError, match="row 2.*empty or missing"):
        read_battles(p)


def test_nan_name_in_dataframe():
    bad = ROWS.copy()
    bad.loc[3, "model_b"] = np.nan
    with pytest.raises(InputError, match="row 4.*empty or missing"):
        read_battles(bad)


def test_empty_log(tmp_path):
    p = tmp_path / "votes.csv"
    ROWS.iloc[:0].to_csv(p, index=False)
    with pytest.raises(InputError, match="empty"):
        read_battles(p)
    q = tmp_path / "nothing.csv"
    q.write_text("")
    with pytest.raises(InputError, match="empty"):
        read_battles(q)
    with pytest.raises(InputError, match="empty"):
        read_battles(ROWS.iloc[:0])


def test_parquet_named_csv(tmp_path):
    p = tmp_path / "votes.csv"
    ROWS.to_parquet(p)
    with pytest.raises(InputError, match="binary.*Parquet"):
        read_battles(p)


def test_csv_named_parquet(tmp_path):
    p = tmp_path / "votes.parquet"
    ROWS.to_csv(p, index=False)
    with pytest.raises(InputError, match="not a valid Parquet"):
        read_battles(p)


def test_jsonl_named_json(tmp_path):
    p = tmp_path / "votes.json"
    ROWS.to_json(p, orient="records", lines=True)
    with pytest.raises(InputError, match="JSON Lines"):
        read_battles(p)


def test_unknown_extension(tmp_path):
    p = tmp_path / "votes.xlsx"
    p.write_text("x")
    with pytest.raises(InputError, match="cannot tell the format"):
        read_battles(p)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_battles(tmp_path / "absent.csv")


def test_non_numeric_weight():
    df = ROWS.assign(weight=["x"] * 6)
    with pytest.raises(InputError, match="weight column must be numeric"):
        read_battles(df)


def test_llmfao_real_file(llmfao_path):
    b = read_battles(llmfao_path)
    assert isinstance(b, Battles)
    assert len(b) == 8931 and b.n_models == 59 and len(b.annotators) == 124 and len(b.prompts) == 13
    assert int((b.outcome == 2).sum()) == 3471
    assert MElo().fit(b).convergence.converged


def test_csv_and_dataframe_agree(tmp_path, llmfao_path):
    df = pd.read_csv(llmfao_path)
    a = read_battles(df)
    b = read_battles(llmfao_path)
    assert a.models == b.models
    np.testing.assert_array_equal(a.model_a, b.model_a)
    np.testing.assert_array_equal(a.outcome, b.outcome)
    np.testing.assert_array_equal(a.annotator, b.annotator)


NULL_LOOKING = ["NA", "null", "None", "nan", "N/A", "NULL", "NaN", "#N/A"]


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "json", "parquet"])
def test_models_named_like_a_missing_value_are_names(tmp_path, fmt):
    """A model or annotator literally named NA, null, None, nan, N/A… is a name in every
    format (CSV used to refuse them as "empty or missing": Arrow's default null markers)."""
    rows = [{"model_a": a, "model_b": "x", "winner": "model_a", "judge": a} for a in NULL_LOOKING]
    df = pd.DataFrame(rows)
    path = tmp_path / f"log.{fmt}"
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "tsv":
        df.to_csv(path, index=False, sep="\t")
    elif fmt == "jsonl":
        df.to_json(path, orient="records", lines=True)
    elif fmt == "json":
        path.write_text(json.dumps(rows))
    else:
        df.to_parquet(path, index=False)
    b = read_battles(path)
    assert sorted(b.models) == sorted([*NULL_LOOKING, "x"])
    assert len(b) == len(rows)
    assert sorted(set(b.annotators)) == sorted(NULL_LOOKING)


def test_a_truly_empty_name_field_is_still_missing(tmp_path):
    """Only an empty field is missing: a model name refused, an annotator read as unknown."""
    path = tmp_path / "log.csv"
    path.write_text("model_a,model_b,winner,judge\nNA,,model_a,j\n")
    with pytest.raises(InputError, match="row 1 .*empty or missing"):
        read_battles(path)
    path.write_text('model_a,model_b,winner,judge\nNA,"",model_a,j\n')
    with pytest.raises(InputError, match="empty or missing"):
        read_battles(path)
    path.write_text("model_a,model_b,winner,judge\nNA,null,model_a,\n")
    assert list(read_battles(path).annotators) == ["unknown"]
