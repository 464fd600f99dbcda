"""Model comparison (fit many configurations → one table) and ``stablearena compare``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stablearena import PairCounts
from stablearena.analysis.comparison import (
    ModelConfig,
    compare_models,
    configurations,
    table_d1_configurations,
)
from stablearena.cli import main
from stablearena.errors import InputError, StableArenaWarning
from stablearena.raters import MElo
from stablearena.raters.ties import Davidson, RaoKupper, ThurstonianBT, TieFitted


def arena(m: int = 8, n: int = 120, seed: int = 0) -> PairCounts:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 0.7, m)
    i, j = np.triu_indices(m, 1)
    d = x[i] - x[j]
    eta = 0.5 + 0.4 * rng.random(len(d))  # pair-specific thresholds: factored ties help
    pw, pl = 1 / (1 + np.exp(-(d - eta))), 1 / (1 + np.exp(-(-d - eta)))
    y = np.array(
        [rng.multinomial(n, p) for p in np.column_stack([pw, pl, 1 - pw - pl])], dtype=float
    )
    return PairCounts.from_arrays([f"m{k}" for k in range(m)], np.column_stack([i, j]), y)


def test_configurations_cross_methods_ties_and_covariance():
    cfgs = configurations(["m-elo", "rao-kupper", "davidson"], [0, 1, 10], [None, 0, 3])
    assert len(cfgs) == 3 + 9 + 9
    assert ModelConfig("m-elo", None, 0) in cfgs
    assert ModelConfig("davidson", 10, 3) in cfgs
    assert all(c.k_tie is None for c in cfgs if c.method == "m-elo")


def test_table_d1_has_the_30_configurations_in_leaderbots_order():
    cfgs = table_d1_configurations()
    assert len(cfgs) == 30
    assert cfgs[0] == ModelConfig("m-elo", None, None, "leaderbot")
    assert cfgs[3] == ModelConfig("bt", None, None, "leaderbot")
    assert cfgs[6] == ModelConfig("rao-kupper", 0, None, "leaderbot")  # ID 7
    assert cfgs[16] == ModelConfig("rao-kupper", 10, 3, "leaderbot")  # ID 17
    assert cfgs[18] == ModelConfig("davidson", 0, None, "leaderbot")  # ID 19
    assert len(set(cfgs)) == 30


def test_config_raters():
    assert isinstance(ModelConfig("m-elo").rater(), MElo)
    bt_cov = ModelConfig("bt", None, 3).rater()
    assert isinstance(bt_cov, ThurstonianBT) and bt_cov.ties == "drop" and bt_cov.k_cov == 3
    rk = ModelConfig("rao-kupper", 10, 3, "leaderbot").rater()
    assert isinstance(rk, RaoKupper) and (rk.k_tie, rk.k_cov, rk.tie_form) == (10, 3, "leaderbot")
    assert isinstance(ModelConfig("davidson").rater(), Davidson)


def test_compare_models_table():
    counts = arena(m=10, n=300)
    cfgs = configurations(["m-elo", "bt", "rao-kupper", "davidson"], [0, 1, 3], [None, 0])
    calls = []
    res = compare_models(
        counts, cfgs, progress=lambda done, total, cfg: calls.append((done, total))
    )
    df = res.to_frame()
    assert len(df) == len(cfgs) == len(res.fitted)
    assert calls[-1] == (len(cfgs), len(cfgs)) and len(calls) == len(cfgs)
    assert list(df["model"]) == [c.label for c in cfgs]  # rows in the order asked
    assert (df["seconds"] > 0).all() and df["converged"].all()
    for col in ("nll", "ce_win", "ce_loss", "rmse", "kld", "jsd", "aic", "bic"):
        assert np.isfinite(df[col].astype(float)).all()
    tie_rows = df[df["method"].isin(["rao-kupper", "davidson"])]
    np.testing.assert_allclose(
        tie_rows["ce_win"] + tie_rows["ce_loss"] + tie_rows["ce_tie"], tie_rows["nll"]
    )
    assert df.loc[df["method"] == "m-elo", "ce_tie"].isna().all()
    # nested tie models never fit worse as k_tie grows (same method and k_cov)
    for (method, kc), grp in tie_rows.groupby(["method", tie_rows["k_cov"].fillna(-1)]):
        nll = grp.sort_values("k_tie")["nll"].to_numpy()
        assert (np.diff(nll) <= 1e-12).all(), (method, kc, nll)
    # each row is the fitted model's own NLL
    for row, fit in zip(res.rows, res.fitted, strict=True):
        assert row["nll"] == pytest.approx(fit.nll, rel=1e-12)
    tau = res.kendall()
    assert tau.shape == (len(cfgs), len(cfgs))
    json.dumps(res.to_dict())


def test_compare_models_held_out_columns():
    counts = arena(n=200, seed=1)
    cfgs = [ModelConfig("m-elo"), ModelConfig("rao-kupper", 0), ModelConfig("rao-kupper", 2)]
    by_battle = compare_models(counts, cfgs, test_ratio=0.2, seed=3).to_frame()
    by_pair = compare_models(counts, cfgs, test_ratio=0.2, split="pair", seed=3).to_frame()
    for df in (by_battle, by_pair):
        for col in ("test_nll", "test_rmse", "test_kld", "test_jsd"):
            assert np.isfinite(df[col]).all()
    assert "test_nll" not in compare_models(counts, cfgs[:1]).to_frame()


def test_compare_rejects_bad_configurations():
    with pytest.raises(InputError, match="unknown method"):
        ModelConfig("elo")
    with pytest.raises(InputError, match="no tie parameters"):
        ModelConfig("m-elo", 1)
    with pytest.raises(InputError, match="k_cov"):
        ModelConfig("davidson", 0, -2)
    with pytest.raises(InputError, match="tie_form"):
        ModelConfig("davidson", 1, None, "other")
    with pytest.raises(InputError, match="no configurations"):
        compare_models(arena(), [])


def test_leaderbot_form_configs_warm_start_from_the_single_threshold_fit():
    counts = arena(seed=2)
    res = compare_models(
        counts, [ModelConfig("davidson", 2, 0, "leaderbot"), ModelConfig("davidson", 0, 0)]
    )
    fits = {c.label: f for c, f in zip(res.configs, res.fitted, strict=True)}
    assert all(isinstance(f, TieFitted) for f in fits.values())
    direct = Davidson(k_tie=2, k_cov=0, tie_form="leaderbot").fit(counts)
    assert fits["davidson k_tie=2 k_cov=0"].nll == pytest.approx(direct.nll, abs=1e-8)


# ------------------------------------------------------------------------------------ CLI
def write_counts(tmp_path, counts: PairCounts) -> str:
    path = tmp_path / "pairs.json"
    path.write_text(
        json.dumps(
            {
                "models": list(counts.models),
                "X": np.column_stack([counts.i, counts.j]).tolist(),
                "Y": np.column_stack([counts.wins, counts.losses, counts.ties])
                .astype(int)
                .tolist(),
            }
        )
    )
    return str(path)


def test_cli_compare_json(tmp_path, capsys):
    path = write_counts(tmp_path, arena(seed=4))
    main(["compare", path, "--methods", "m-elo,rao-kupper,davidson", "--k-tie", "0,1", "--k-cov", "none,0",
          "--format", "json", "--no-progress", "--kendall"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    rows = out["configurations"]
    assert len(rows) == 2 + 4 + 4
    assert {r["method"] for r in rows} == {"m-elo", "rao-kupper", "davidson"}
    assert out["n_comparisons"] == int(arena(seed=4).n_comparisons)
    assert len(out["kendall_tau"]) == len(rows)


def test_cli_compare_table_with_test_split(tmp_path):
    path = write_counts(tmp_path, arena(seed=5))
    out_file = tmp_path / "table.txt"
    main(["compare", path, "--methods", "rao-kupper,m-elo", "--k-tie", "0,2", "--test-ratio", "0.1",
          "--no-progress", "--output", str(out_file)])  # fmt: skip
    out = out_file.read_text()
    assert "Model comparison" in out and "RK" in out and "test NLL" in out
    assert "…" not in out  # nothing truncated at the file width


def test_cli_compare_csv(tmp_path, capsys):
    path = write_counts(tmp_path, arena(seed=6))
    main(["compare", path, "--methods", "davidson", "--format", "csv", "--no-progress"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("model,method,k_tie,k_cov") and len(lines) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--methods", "elo"], "unknown method"),
        (["--k-cov", "two"], "--k-cov"),
        (["--k-tie", "none"], "--k-tie"),
        (["--k-tie", "-1"], "non-negative"),
        (["--test-ratio", "1.5"], "test_ratio"),
        (["--split", "prompt", "--test-ratio", "0.1"], "split"),
    ],
)
def test_cli_compare_bad_options(tmp_path, capsys, args, message):
    path = write_counts(tmp_path, arena(m=5, seed=7))
    with pytest.raises(SystemExit) as exc:
        main(["compare", path, "--no-progress", *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_rank_with_a_tie_model(tmp_path, capsys):
    path = write_counts(tmp_path, arena(seed=8))
    main(
        ["rank", path, "--method", "rao-kupper", "--k-tie", "2", "--k-cov", "0", "--format", "json"]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "rao-kupper" and out["k_tie"] == 2 and out["k_cov"] == 0
    fit = RaoKupper(k_tie=2, k_cov=0).fit(arena(seed=8))
    assert out["nll"] == pytest.approx(fit.nll, rel=1e-9)


def test_a_degenerate_covariance_fit_says_so():
    """Planted defect: on this small arena three models collapse to zero variance and equal
    scores under bt with diagonal covariance; no finite maximum exists, and the fit must say so."""
    with pytest.warns(StableArenaWarning, match="degenerate covariance"):
        fit = ThurstonianBT(ties="drop", k_cov=0).fit(arena(m=8, n=120, seed=0))
    assert not fit.convergence.converged
    assert any("degenerate covariance" in note for note in fit.notes)
    assert np.isfinite(fit.scores).all() and np.isfinite(fit.nll)
