"""The friction list of issue 12: what a user sees in table and CSV output, item by item."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from stablearena import Battles


def write_log(tmp_path, battles: Battles, name: str = "votes.csv"):
    path = tmp_path / name
    battles.to_frame().to_csv(path, index=False)
    return path


@pytest.fixture
def arena_csv(tmp_path):
    from stablearena.data.datasets import example_arena

    return write_log(tmp_path, example_arena(n_battles=4000, seed=3).battles)


def test_notes_and_dropped_models_are_shown_under_the_table(tmp_path, cli):
    rows = "model_a,model_b,winner\n" + "a,b,model_a\nb,a,model_b\nb,c,tie\nc,a,model_a\n" * 3
    rows += "a,d,model_a\n"  # d: one battle, dropped by --min-battles 2
    path = tmp_path / "votes.csv"
    path.write_text(rows)
    code, out, err = cli("rank", str(path), "--min-battles", "2", "--exclude", "c")
    assert code == 0, err
    assert "left out (--exclude): c" in out
    assert "left out (fewer than 2 battles (--min-battles)): d" in out
    code, out, _ = cli("rank", str(path), "--min-battles", "2", "-f", "json")
    assert {"model": "d", "reason": "fewer than 2 battles (--min-battles)"} in json.loads(out)[
        "dropped_models"
    ]
    code, out, _ = cli("rank", str(path), "-m", "am-elo")
    assert code == 0 and "note: the data has no annotator ids" in " ".join(out.split())


def test_prior_note_under_the_table(tmp_path, cli):
    path = tmp_path / "votes.csv"
    path.write_text("model_a,model_b,winner\na,b,model_a\nb,c,model_a\na,c,model_a\n")
    code, out, err = cli("rank", str(path))
    assert code == 0
    assert "note:" in out and "infinite" in " ".join(out.split())
    assert "warning:" in err  # and said once on stderr while fitting


def test_kendall_is_honoured_by_table_csv_and_json(arena_csv, cli):
    args = ["compare", str(arena_csv), "--methods", "m-elo,bt", "--no-progress", "--kendall"]
    code, out, err = cli(*args)
    assert code == 0, err
    assert "Kendall's τ between the rankings" in out
    code, out, _ = cli(*args, "-f", "csv")
    header = next(csv.reader(io.StringIO(out)))
    taus = [h for h in header if h.startswith("tau[")]
    assert len(taus) == 2
    rows = list(csv.DictReader(io.StringIO(out)))
    assert float(rows[0][taus[0]]) == pytest.approx(1.0)
    code, out, _ = cli(*args, "-f", "json")
    assert len(json.loads(out)["kendall_tau"]) == 2
    code, out, _ = cli(*args[:-1], "-f", "csv")  # without --kendall: no τ columns
    assert "tau[" not in out


def test_table_d1_uses_leaderbots_tie_form_unless_told(monkeypatch, cli, tmp_path):
    """`compare --table-d1` as printed in the README reproduces leaderbot's Table D.1, whose
    factored ties use leaderbot's form; an explicit --tie-form still wins."""
    import stablearena.analysis.comparison as comparison

    seen = []
    real = comparison.table_d1_configurations

    def spy(tie_form="leaderbot"):
        seen.append(tie_form)
        raise SystemExit(0)

    monkeypatch.setattr(comparison, "table_d1_configurations", spy)
    cli("compare", "--table-d1", "--no-progress")
    cli("compare", "--table-d1", "--tie-form", "nested", "--no-progress")
    assert seen == ["leaderbot", "nested"]
    assert {c.tie_form for c in real("leaderbot")} == {"leaderbot"}


def test_annotators_flagged_first_then_fitted_then_waiting(tmp_path, cli):
    from stablearena.data.simulate import simulate_battles

    abilities = np.array([1.0] * 8 + [-1.0, -1.0] + [1.0])  # two flippers, one with few records
    b = simulate_battles(
        np.linspace(1200, 800, 8),
        6000,
        abilities=abilities,
        annotator_probs=[1.0] * 10 + [0.002],
        annotators=[f"judge-{k:02d}" for k in range(11)],
        seed=2,
    )
    path = write_log(tmp_path, b)
    code, out, err = cli("annotators", str(path), "--min-records", "50", "-f", "json")
    assert code == 0, err
    payload = json.loads(out)
    status = [a["status"] for a in payload["annotators"]]
    first_fit = status.index("included")
    assert set(status[:first_fit]) <= {"flagged", "excluded"} and first_fit == payload["n_flagged"]
    assert payload["flagged"] == [a["annotator"] for a in payload["annotators"][:first_fit]]
    assert sorted(payload["flagged"]) == ["judge-08", "judge-09"]
    assert status[-1] == "left_out" and payload["n_waiting"] == 1
    code, out, _ = cli("annotators", str(path), "--min-records", "50")
    text = " ".join(out.split())
    assert (
        text.index("FLAGGED annotators")
        < text.index("annotators in the fit")
        < text.index("waiting: fewer than 50 records")
    )


def test_fit_progress_is_reported_by_the_tie_fitter():
    from stablearena._progress import reporting
    from stablearena.data.datasets import example_arena
    from stablearena.raters.ties import RaoKupper

    seen: list[str] = []
    with reporting(seen.append):
        RaoKupper(k_tie=1, k_cov=1).fit(example_arena(n_battles=3000, seed=1).battles)
    assert any("iteration" in s for s in seen)
    assert any("gradient" in s for s in seen)


def test_fit_progress_spinner_only_on_a_terminal(monkeypatch, cli):
    """No spinner text in captured (non-terminal) output."""
    code, out, err = cli("rank", "-m", "davidson")
    assert code == 0 and "fitting" not in err


def test_help_lists_allowed_values_of_every_command(cli):
    code, out, _ = cli("compare", "--help")
    assert "[nested|leaderbot]" in out and "[battle|pair]" in out
    code, out, _ = cli("annotators", "--help")
    assert "[mean|sum]" in out and "<bool>" not in out
    code, out, _ = cli("experiment", "perturbation", "--help")
    assert "[random,equal,flip,mixed]" in out
