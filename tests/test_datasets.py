"""Built-in data: the simulated example arena and the Chatbot Arena 2024 loader."""

from __future__ import annotations

import numpy as np
import pytest

from stablearena import InputError, MElo, PairCounts
from stablearena.datasets import chatbot_arena_2024, example_arena
from stablearena.metrics import kendall_tau


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


def test_chatbot_arena_loader_from_path(chatbot_arena_path):
    c = chatbot_arena_2024(chatbot_arena_path)
    assert isinstance(c, PairCounts) and c.n_models == 129 and c.n_comparisons == 1_670_250


def test_chatbot_arena_loader_from_leaderbot_package():
    pytest.importorskip("leaderbot", reason="leaderbot is not installed (pip install leaderbot)")
    c = chatbot_arena_2024()
    assert c.n_comparisons == 1_670_250


def test_chatbot_arena_loader_rejects_battle_logs(tmp_path):
    p = tmp_path / "log.csv"
    p.write_text("model_a,model_b,winner\na,b,tie\n")
    with pytest.raises(InputError, match="pair-count"):
        chatbot_arena_2024(p)
