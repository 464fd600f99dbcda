"""The ``stablearena rank`` command: outputs, the JSON contract, and error handling."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from stablearena.cli import main


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_rank_default_example_is_labelled_simulated(capsys):
    code, out, _ = run(capsys, "rank", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert payload["simulated"] is True and "simulated" in payload["source"]
    assert (
        payload["method"] == "m-elo" and payload["n_models"] == 12 and payload["n_battles"] == 20000
    )
    ranks = [m["rank"] for m in payload["models"]]
    assert ranks == list(range(1, 13))
    ratings = [m["rating"] for m in payload["models"]]
    assert ratings == sorted(ratings, reverse=True)
    assert set(payload["models"][0]) >= {"rank", "model", "rating", "battles"}
    assert isinstance(payload["nll"], float)


def test_rank_table_mentions_simulated(capsys):
    code, out, _ = run(capsys, "rank")
    assert code == 0 and "SIMULATED" in out and "aurora-70b" in out


def test_rank_csv_to_file(tmp_path, capsys):
    target = tmp_path / "board.csv"
    code, _, err = run(capsys, "rank", "--format", "csv", "--output", str(target), "--method", "bt")
    assert code == 0 and "wrote" in err
    df = pd.read_csv(target)
    assert list(df.columns[:4]) == ["rank", "model", "rating", "battles"]


def test_rank_options_exclude_anchor(capsys):
    code, out, _ = run(
        capsys,
        "rank",
        "-f",
        "json",
        "--exclude",
        "lumen-nano,kestrel-base",
        "--anchor",
        "fjord-7b=1500",
    )
    payload = json.loads(out)
    assert code == 0 and payload["n_models"] == 10
    assert {m["model"]: m["rating"] for m in payload["models"]}["fjord-7b"] == 1500.0


def test_rank_real_chatbot_arena(capsys, chatbot_arena_path):
    code, out, _ = run(
        capsys,
        "rank",
        str(chatbot_arena_path),
        "--method",
        "m-elo",
        "--both-bad",
        "drop",
        "--format",
        "json",
    )
    payload = json.loads(out)
    assert code == 0
    assert payload["n_battles"] == 1_374_996
    assert payload["nll"] == pytest.approx(0.6554111, abs=1e-7)
    assert [m["model"] for m in payload["models"][:5]] == [
        "chatgpt-4o-latest",
        "gemini-1.5-pro-exp-0801",
        "gpt-4o-2024-05-13",
        "gpt-4o-mini-2024-07-18",
        "claude-3-5-sonnet-20240620",
    ]


def test_rank_llmfao_without_column_options(capsys, llmfao_path):
    code, out, _ = run(capsys, "rank", str(llmfao_path), "--format", "json")
    payload = json.loads(out)
    assert code == 0 and payload["n_models"] == 59 and payload["n_battles"] == 8931


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("model_a,model_b,winner\na,b,model_a\nb,c,maybe\n", "data row 2"),
        ("foo,bar,winner\na,b,model_a\n", "no column for model_a"),
        ("model_a,model_b,winner\na,a,model_a\n", "battles itself"),
        ("model_a,model_b,winner\n", "empty"),
    ],
)
def test_bad_input_one_line_nonzero(tmp_path, capsys, content, message):
    p = tmp_path / "votes.csv"
    p.write_text(content)
    code, _, err = run(capsys, "rank", str(p))
    assert code == 2
    assert message in err and "Traceback" not in err


def test_disconnected_graph_message(tmp_path, capsys):
    p = tmp_path / "votes.csv"
    p.write_text("model_a,model_b,winner\na,b,model_a\nb,a,model_a\nc,d,tie\n")
    code, _, err = run(capsys, "rank", str(p))
    assert code == 2 and "disconnected" in err


def test_option_not_for_method(capsys):
    code, _, err = run(capsys, "rank", "--method", "m-elo", "--k-tie", "3")
    assert code == 2 and "--k-tie does not apply" in err


def test_unknown_method(capsys):
    code, _, err = run(capsys, "rank", "--method", "glicko")
    assert code == 2 and "unknown --method" in err


def test_debug_shows_traceback(tmp_path):
    p = tmp_path / "votes.csv"
    p.write_text("model_a,model_b,winner\na,a,model_a\n")
    quiet = subprocess.run(
        [sys.executable, "-m", "stablearena", "rank", str(p)], capture_output=True, text=True
    )
    loud = subprocess.run(
        [sys.executable, "-m", "stablearena", "--debug", "rank", str(p)],
        capture_output=True,
        text=True,
    )
    assert (
        quiet.returncode == 2
        and "Traceback" not in quiet.stderr
        and "battles itself" in quiet.stderr
    )
    assert loud.returncode != 0 and "Traceback" in loud.stderr


def test_usage_error_exit_code_and_message(capsys):
    code, _, err = run(capsys, "rank", "--no-such-option")
    assert code == 2 and "No such option" in err and "Traceback" not in err


def test_help_exits_zero(capsys):
    code, out, _ = run(capsys, "rank", "--help")
    assert code == 0 and "--method" in out
