"""Style features (stablearena.data.style_features), extra columns in the reader, category boards
(stablearena.data.categories) and the ``rank --style/--covariate/--where/--by`` command line."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from stablearena.data.categories import parse_where, split_by, value_labels, where
from stablearena.data.io import read_battles
from stablearena.data.simulate import random_ratings
from stablearena.data.style_features import (
    add_covariates,
    answer_text,
    count_tokens,
    normalized_difference,
    simulate_style_battles,
    style_counts,
    style_differences,
)
from stablearena.errors import InputError

ANSWER = """# Title
Some **bold** words and __more bold__.

## Steps
1. first
2. second
- item
* item
+ item

```python
# not a header
- not a list
**not bold**
```
"""


def test_style_counts_follow_lmarena_patterns():
    tokens, headers, lists, bold = style_counts(ANSWER)
    assert headers == 2
    assert lists == 5
    assert bold == 2
    assert tokens == count_tokens(ANSWER)  # tokens on the whole answer, code included
    assert count_tokens("Hello, world!") == 4


def test_answer_text_of_conversations():
    conv = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "one"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": [{"type": "text", "text": "two"}]},
    ]
    assert answer_text(conv) == ["one", "two"]
    assert answer_text(json.dumps(conv)) == ["one", "two"]
    assert answer_text("plain answer") == ["plain answer"]
    assert answer_text(None) == []


def test_normalized_difference():
    np.testing.assert_allclose(normalized_difference([10, 0, 3], [5, 0, 3]), [5 / 16, 0, 0])


def _records(n=300, seed=0):
    b = simulate_style_battles(
        random_ratings(5, seed=seed), n, gamma=(0.3, 0.1, 0.1, 0.1), seed=seed
    )
    e = b.extra
    out = []
    for r in range(len(b)):
        meta = {
            "sum_assistant_a_tokens": int(e["length_a"][r]),
            "sum_assistant_b_tokens": int(e["length_b"][r]),
        }
        for f, key in (
            ("headers", "header_count"),
            ("lists", "list_count"),
            ("bold", "bold_count"),
        ):
            sub = {"h1": 0, "h2": 0} if f == "headers" else {"x": 0, "y": 0}
            for side in ("a", "b"):
                d = dict(sub)
                d[next(iter(d))] = int(e[f"{f}_{side}"][r])
                meta[f"{key}_{side}"] = d
        out.append(
            {
                "model_a": b.models[b.model_a[r]],
                "model_b": b.models[b.model_b[r]],
                "winner": ["model_a", "model_b", "tie"][b.outcome[r]],
                "category": ["code", "math", "chat"][r % 3],
                "hard": bool(r % 2),
                "conv_metadata": meta,
                "len_a": int(e["length_a"][r]),
                "len_b": int(e["length_b"][r]),
                "diff": float(normalized_difference(e["length_a"][r], e["length_b"][r])),
            }
        )
    return b, out


@pytest.fixture
def arena_jsonl(tmp_path):
    b, recs = _records()
    path = tmp_path / "arena.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return b, path


def test_metadata_nested_gives_the_four_features(arena_jsonl):
    b, path = arena_jsonl
    battles = read_battles(path, extra="*")
    z, names = style_differences(battles)
    assert names == ("length", "headers", "lists", "bold")
    raw = np.column_stack(
        [normalized_difference(b.extra[f"{f}_a"], b.extra[f"{f}_b"]) for f in names]
    )
    # read_battles sorts model names the same way, and keeps battle order
    np.testing.assert_allclose(z, raw)


def test_metadata_flattened_to_top_level_columns(arena_jsonl):
    b, path = arena_jsonl
    frame = pd.read_json(path, lines=True)
    meta = pd.json_normalize(frame.pop("conv_metadata"))
    flat = pd.concat([frame, meta], axis=1)
    battles = read_battles(flat, extra="*")
    z, names = style_differences(battles)
    assert len(names) == 4 and z.shape == (len(b), 4)


def test_text_columns_give_the_four_features(tmp_path):
    frame = pd.DataFrame(
        {
            "model_a": ["x", "y"],
            "model_b": ["y", "x"],
            "winner": ["model_a", "tie"],
            "response_a": [ANSWER, "short"],
            "response_b": ["short", ANSWER],
        }
    )
    battles = read_battles(frame, extra="*")
    z, names = style_differences(battles)
    counts = np.array(style_counts(ANSWER), dtype=float)
    short = np.array(style_counts("short"), dtype=float)
    np.testing.assert_allclose(z[0], normalized_difference(counts, short))
    np.testing.assert_allclose(z[1], -z[0])
    with pytest.raises(InputError, match="no answer-text column"):
        style_differences(battles, text_columns=("nope_a", "nope_b"))


def test_named_covariates(arena_jsonl):
    _, path = arena_jsonl
    battles = read_battles(path, extra=["len_a", "len_b", "diff"])
    z1, n1 = style_differences(battles, ["len_a:len_b"])
    z2, n2 = style_differences(battles, ["diff"])
    np.testing.assert_allclose(z1, z2)
    assert n1 == ("len_a:len_b",) and n2 == ("diff",)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (["nope:len_b"], "no column 'nope'"),
        (["len_a:"], "must look like"),
        (["ghost"], "no column"),
    ],
)
def test_bad_covariate_specs(arena_jsonl, spec, message):
    _, path = arena_jsonl
    battles = read_battles(path, extra=["len_a", "len_b"])
    with pytest.raises(InputError, match=message):
        style_differences(battles, spec)


def test_no_style_information_is_an_error_that_says_what_is_needed():
    frame = pd.DataFrame({"model_a": ["x"], "model_b": ["y"], "winner": ["tie"]})
    with pytest.raises(InputError, match="conv_metadata"):
        add_covariates(read_battles(frame, extra="*"))


def test_missing_metadata_value_names_the_row(tmp_path):
    _, recs = _records(20)
    recs[4]["conv_metadata"]["sum_assistant_a_tokens"] = None
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    with pytest.raises(InputError, match="row 5"):
        add_covariates(read_battles(path, extra="*"))


def test_reader_keeps_nested_fields_and_refuses_unknown_ones(arena_jsonl):
    _, path = arena_jsonl
    battles = read_battles(path, extra=["conv_metadata.header_count_a", "category"])
    assert set(battles.extra) == {
        "conv_metadata.header_count_a.h1",
        "conv_metadata.header_count_a.h2",
        "category",
    }
    with pytest.raises(InputError, match="has no field 'nope'"):
        read_battles(path, extra=["conv_metadata.nope"])
    with pytest.raises(InputError, match="no column 'ghost'"):
        read_battles(path, extra=["ghost"])


def test_extra_columns_follow_filters(arena_jsonl):
    _, path = arena_jsonl
    battles = read_battles(path, extra=["category"])
    kept = battles.filter(both_bad="drop", exclude_models=[battles.models[0]])
    assert len(kept.extra["category"]) == len(kept)


# ---------------------------------------------------------------------------------- categories
def test_where_and_by(arena_jsonl):
    _, path = arena_jsonl
    battles = read_battles(path, extra=["category", "hard"])
    code = where(battles, parse_where(["category=code"]))
    assert len(code) == 100
    both = where(battles, parse_where(["category=code", "category=math", "hard=true"]))
    assert len(both) == 100
    boards = split_by(battles, "hard")
    assert list(boards) == ["false", "true"] and sum(len(v) for v in boards.values()) == len(
        battles
    )
    codes, labels = value_labels(np.array([1.0, 2.5, np.nan]))
    assert labels == ["1", "2.5", "null"] and list(codes) == [0, 1, 2]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["category"], "COLUMN=VALUE"),
        (["category=poetry"], "never reads 'poetry'"),
        (["ghost=1"], "no column"),
    ],
)
def test_where_bad_input(arena_jsonl, items, message):
    _, path = arena_jsonl
    battles = read_battles(path, extra=["category"])
    with pytest.raises(InputError, match=message):
        where(battles, parse_where(items))


# ---------------------------------------------------------------------------------- CLI
def test_cli_style_json_keeps_contract(cli, arena_jsonl):
    _, path = arena_jsonl
    code, out, err = cli("rank", path, "--style", "--format", "json")
    assert code == 0, err
    p = json.loads(out)
    assert p["method"] == "style-m-elo"
    for key in (
        "n_battles",
        "n_models",
        "nll",
        "models",
        "convergence",
        "notes",
        "source",
        "simulated",
    ):
        assert key in p
    assert [f["feature"] for f in p["style"]["features"]] == ["length", "headers", "lists", "bold"]
    assert {"raw_rank", "rank_shift"} <= set(p["models"][0])


def test_cli_covariate_ci_and_table(cli, arena_jsonl):
    _, path = arena_jsonl
    code, out, err = cli(
        "rank", path, "--covariate", "len_a:len_b", "--ci", "sandwich", "--penalty", "all"
    )
    assert code == 0, err
    assert "style coefficients" in out and "len_a:len_b" in out


def test_cli_by_is_keyed_by_value_and_csv_has_the_column(cli, arena_jsonl):
    _, path = arena_jsonl
    code, out, err = cli("rank", path, "--by", "category", "--format", "json")
    assert code == 0, err
    p = json.loads(out)
    assert sorted(p) == ["chat", "code", "math"]
    assert p["code"]["by"] == {"category": "code"} and p["code"]["method"] == "m-elo"
    code, out, err = cli("rank", path, "--style", "--by", "hard", "--format", "csv")
    assert code == 0, err
    assert out.splitlines()[0].startswith("hard,rank,model")


def test_cli_where_plain_method(cli, arena_jsonl):
    _, path = arena_jsonl
    code, out, err = cli(
        "rank", path, "--where", "category=math", "--format", "json", "--method", "bt"
    )
    assert code == 0, err
    p = json.loads(out)
    assert p["where"] == {"category": ["math"]} and p["method"] == "bt"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--style", "--method", "elo"], "work with --method m-elo"),
        (["--where", "ghost=1"], "no column 'ghost'"),
        (["--by", "ghost"], "no column 'ghost'"),
        (
            ["--style", "--ci", "bootstrap", "--cluster", "prompt", "--rounds", "4"],
            "no clustered bootstrap",
        ),
        (["--covariate", "len_a:nope"], "no column 'nope'"),
        (["--style", "--solver", "adam"], "does not apply"),
    ],
)
def test_cli_bad_input_one_line(cli, arena_jsonl, args, message):
    _, path = arena_jsonl
    code, _, err = cli("rank", path, *args)
    assert code == 2
    assert message in err


def test_cli_style_refuses_pair_counts(cli, tmp_path):
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps({"models": ["a", "b"], "X": [[0, 1]], "Y": [[3, 2, 1]]}))
    code, _, err = cli("rank", path, "--style")
    assert code == 2 and "pair counts" in err


# ---------------------------------------------------------------------------------- plot, report
def test_report_with_style_shows_gamma_raw_ranks_and_the_same_board_as_rank(
    cli, arena_jsonl, tmp_path
):
    """``report --style``: the style-controlled board of ``rank --style`` (same order), a Style
    section with every feature's γ as ``rank`` prints it, the raw rank and shift columns, and
    the command to reproduce it."""
    _, path = arena_jsonl
    code, out, err = cli("rank", path, "--style", "--ci", "fisher", "--format", "json")
    assert code == 0, err
    board = json.loads(out)
    html_path = tmp_path / "style.html"
    code, _, err = cli("report", path, "--style", "-o", html_path)
    assert code == 0, err
    html = html_path.read_text()
    assert 'id="style"' in html and 'href="#style"' in html
    assert "Style-controlled m-ELO" in html
    for f in board["style"]["features"]:
        assert f'data-feature="{f["feature"]}"' in html
        assert f"{f['coef']:.4f}" in html
    order = re.findall(r'<tr class="[^"]*" data-model="([^"]+)"', html)
    assert order == [m["model"] for m in board["models"]]
    assert "raw rank" in html and "shift" in html
    shifts = {m["model"]: m["rank_shift"] for m in board["models"]}
    assert any(shifts.values())  # the fixture's style effects move some model
    assert "--style" in html  # the reproduce command


def test_report_and_plot_take_where_and_refuse_style_where_it_has_no_meaning(
    cli, arena_jsonl, tmp_path
):
    _, path = arena_jsonl
    code, out, err = cli("rank", path, "--where", "category=math", "--format", "json")
    assert code == 0, err
    n_math = json.loads(out)["n_battles"]
    html_path = tmp_path / "math.html"
    code, _, err = cli("report", path, "--where", "category=math", "-o", html_path)
    assert code == 0, err
    html = html_path.read_text()
    assert "[category=math]" in html and 'id="style"' not in html
    assert f"{n_math:,}" in html
    png = tmp_path / "style.png"
    code, _, err = cli("plot", path, "--style", "--kind", "leaderboard", "-o", png)
    assert code == 0, err
    assert png.stat().st_size > 10_000
    code, _, err = cli("plot", path, "--style", "--method", "elo", "-o", png)
    assert code != 0 and "work with --method m-elo" in err
    html_path = tmp_path / "boot.html"
    code, _, err = cli(
        "report", path, "--ci", "bootstrap", "--style", "--rounds", "20", "-o", html_path
    )
    assert code == 0, err  # style-controlled m-ELO's battle bootstrap
    assert "bootstrap" in html_path.read_text()
    code, _, err = cli(
        "report", path, "--ci", "bootstrap", "--style", "--cluster", "prompt", "-o", html_path
    )
    assert code != 0 and "no clustered bootstrap" in err
