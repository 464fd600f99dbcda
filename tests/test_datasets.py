"""Built-in data: the bundled real data sets (by name and by path, in Python and on the command
line, with their licences), the simulated example arena and the Chatbot Arena 2024 loader."""

from __future__ import annotations

import fnmatch
import json
import os
from pathlib import Path

import numpy as np
import pytest

from stablearena import Battles, InputError, MElo, PairCounts
from stablearena.analysis.metrics import kendall_tau
from stablearena.data import datasets as ds
from stablearena.data.datasets import chatbot_arena_2024, example_arena

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
#: The folder the bundled files were copied from, beside the checkout (only for the comparison).
ORIGINALS = Path(os.environ.get("STABLEARENA_SHARED_DATA", ROOT.parent / "shared" / "data"))
REAL = ("llmfao", "chatbot-arena-2024")


# ------------------------------------------------------------------------ the example arena
def test_example_arena_is_deterministic_and_labelled():
    a, b = example_arena(), example_arena()
    np.testing.assert_array_equal(a.battles.outcome, b.battles.outcome)
    np.testing.assert_array_equal(a.battles.annotator, b.battles.annotator)
    assert "simulated" in a.battles.source
    assert len(a.battles) == 20_000 and a.battles.n_models == 12 and len(a.battles.annotators) == 40
    assert 0.1 < np.mean(a.battles.outcome >= 2) < 0.4  # it has ties
    assert a.kinds.count("flipper") == 3 and np.all(a.abilities[np.array(a.kinds) == "flipper"] < 0)


def test_example_arena_truth_is_recovered():
    a = example_arena()
    f = MElo().fit(a.battles)
    assert kendall_tau(f.ratings, a.true_ratings) >= 0.95


def test_example_by_name_is_the_example_arena():
    b = ds.load("example")
    assert b.source == ds.EXAMPLE_SOURCE
    np.testing.assert_array_equal(b.outcome, example_arena().battles.outcome)
    with pytest.raises(InputError, match="simulated .* has no file"):
        ds.path("example")


# ------------------------------------------------------------------------ the real data sets
def test_llmfao_by_name_and_by_path():
    p = ds.path("llmfao")
    assert p.is_file() and p.parent == ds.DATA_DIR and p.name == "llmfao.csv"
    b = ds.load("llmfao")
    assert isinstance(b, Battles) and b.source == ds.info("llmfao").label
    assert (len(b), b.n_models, len(b.annotators), len(b.prompts)) == (8_931, 59, 124, 13)
    assert np.bincount(b.outcome).tolist() == [2_911, 2_549, 3_471]  # left, right, tie
    info = ds.info("llmfao")
    assert (info.battles, info.models, info.annotators) == (8_931, 59, 124)
    with p.open() as f:
        assert f.readline().strip() == "id,prompt,model_x,model_y,worker,winner,left,right"


def test_chatbot_arena_by_name_and_by_path():
    p = ds.path("chatbot-arena-2024")
    assert p.is_file() and p.name == "chatbot_arena_20240814_pairs.json"
    c = ds.load("chatbot-arena-2024")
    assert isinstance(c, PairCounts) and c.n_models == 129 and c.n_comparisons == 1_670_250
    raw = json.loads(p.read_text())
    assert len(raw["models"]) == 129 and len(raw["X"]) == 3_460
    assert np.asarray(raw["Y"]).sum(axis=0).tolist() == [595_570, 498_305, 281_121, 295_254]
    assert (ds.info("chatbot-arena-2024").battles, ds.info("chatbot-arena-2024").annotators) == (
        1_670_250,
        None,
    )


@pytest.mark.parametrize("call", [ds.load, ds.path, ds.info])
@pytest.mark.parametrize("name", ["nope", "LLMFAO", "llmfao.csv", ""])
def test_an_unknown_name_lists_the_known_ones(call, name):
    with pytest.raises(InputError) as err:
        call(name)
    for known in ds.names():
        assert known in str(err.value)


def test_names_listing_and_licences():
    assert ds.names() == ("llmfao", "chatbot-arena-2024", "example")
    records = {r["name"]: r for r in ds.listing()}
    attribution = (ds.DATA_DIR / "ATTRIBUTION.md").read_text()
    for name in REAL:
        d = ds.info(name)
        assert records[name]["bytes"] == ds.path(name).stat().st_size > 50_000
        licence = ds.DATA_DIR / d.licence_file
        assert licence.is_file() and licence.stat().st_size > 1000
        assert (
            d.filename in attribution and d.licence in attribution and d.licence_file in attribution
        )
    assert "Dmitry Ustalov" in attribution and "Dmitry Ustalov" in ds.info("llmfao").attribution
    assert (
        "Creative Commons Attribution 4.0" in (ds.DATA_DIR / "LICENSES/CC-BY-4.0.txt").read_text()
    )
    assert (
        "Redistribution and use"
        in (ds.DATA_DIR / "LICENSES/BSD-3-Clause-leaderbot.txt").read_text()
    )
    assert records["example"]["bytes"] == 0


def test_the_package_data_patterns_cover_every_bundled_file():
    """A wheel holds what pyproject's package-data lists: every file under data/ must match."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["stablearena.data.datasets"]
    package = ds.DATA_DIR.parent
    files = [
        p.relative_to(package).as_posix()
        for p in ds.DATA_DIR.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    ]
    assert len(files) == 5
    for f in files:
        assert any(fnmatch.fnmatch(f, pat) for pat in patterns), f


@pytest.mark.skipif(not ORIGINALS.is_dir(), reason=f"{ORIGINALS} absent: nothing to compare with")
@pytest.mark.parametrize("name", REAL)
def test_the_bundled_files_are_byte_identical_to_the_originals(name):
    bundled = ds.path(name)
    assert bundled.read_bytes() == (ORIGINALS / bundled.name).read_bytes()


# ------------------------------------------------------------------------ chatbot_arena_2024()
def test_chatbot_arena_loader_default_and_from_path(chatbot_arena_path):
    c = chatbot_arena_2024(chatbot_arena_path)
    assert isinstance(c, PairCounts) and c.n_models == 129 and c.n_comparisons == 1_670_250
    d = chatbot_arena_2024()
    assert d.models == c.models
    for column in ("i", "j", "wins", "losses", "ties", "ties_both_bad"):
        np.testing.assert_array_equal(getattr(d, column), getattr(c, column))


def test_chatbot_arena_loader_matches_the_leaderbot_package():
    leaderbot = pytest.importorskip("leaderbot", reason="leaderbot is not installed")
    theirs = Path(leaderbot.__file__).parent / "data" / "chatbotarena_20240814.json"
    assert theirs.read_bytes() == ds.path("chatbot-arena-2024").read_bytes()


def test_chatbot_arena_loader_rejects_battle_logs(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text("model_a,model_b,winner\na,b,tie\n")
    with pytest.raises(InputError, match="pair-count"):
        chatbot_arena_2024(p)


# ------------------------------------------------------------------------ the command line
def test_rank_by_name(cli):
    code, out, _ = cli("rank", "llmfao", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert payload["n_models"] == 59 and payload["n_battles"] == 8_931
    code, out, _ = cli("rank", "chatbot-arena-2024", "--format", "json")
    assert code == 0 and json.loads(out)["n_models"] == 129


def test_a_name_reads_the_same_as_the_path(cli):
    by_name = cli("rank", "llmfao", "--format", "csv")
    by_path = cli("rank", ds.path("llmfao"), "--format", "csv")
    assert by_name[0] == by_path[0] == 0 and by_name[1] == by_path[1]


def test_other_commands_take_names(cli):
    code, out, _ = cli("annotators", "llmfao", "--format", "json")
    assert code == 0 and len(json.loads(out)["annotators"]) == 124
    code, out, _ = cli("next-pairs", "chatbot-arena-2024", "-k", "2", "--format", "json")
    assert code == 0 and len(json.loads(out)["pairs"]) == 2


def test_an_existing_file_wins_over_a_name(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("llmfao").write_text("model_a,model_b,winner\nx,y,model_a\ny,x,tie\n")
    code, out, _ = cli("rank", "llmfao", "--format", "json")
    assert code == 0 and json.loads(out)["n_models"] == 2


def test_a_missing_file_lists_the_data_sets(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("rank", "llmfoa")
    assert code == 2 and out == ""
    assert "llmfoa: no such file" in err
    for name in ds.names():
        assert name in err


def test_datasets_command(cli):
    code, out, _ = cli("datasets")
    assert code == 0
    for name in ds.names():
        assert name in out
    for text in ("CC BY 4.0", "BSD-3-Clause", "8931", "1670250", "github.com/dustalov/evalica"):
        assert text in out
    code, out, _ = cli("datasets", "--format", "json")
    records = json.loads(out)["datasets"]
    assert [r["name"] for r in records] == list(ds.names())
    assert records[0]["bytes"] == ds.path("llmfao").stat().st_size
    code, out, _ = cli("datasets", "--path", "chatbot-arena-2024")
    assert code == 0 and out.strip() == str(ds.path("chatbot-arena-2024"))
    code, out, err = cli("datasets", "--path", "nope")
    assert code == 2 and "llmfao, chatbot-arena-2024, example" in err
