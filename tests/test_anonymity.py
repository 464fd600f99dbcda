"""The anonymity rule (issue 31 item 3) and the export in FastChat's public schema (item 6):
an answer that names a model or its maker makes its battle non-anonymous — the vote is stored
and exported with ``anony: false`` and left out of the default board — and the export read back
by ``stablearena rank`` gives the live board (docs/guides/arena-page.md, "Anonymous votes").

The detector's tests are hypothesis fuzz tests (bounded examples, no deadline); the arena's run
against a real ``stablearena serve`` process and a real demo model server process."""

from __future__ import annotations

import io
import json
import re
import time
import unicodedata

import httpx
import numpy as np
import pandas as pd
import pytest
from arena_process import page_server
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena.data.io import read_battles, read_counts
from stablearena.data.language import language_of
from stablearena.errors import InputError, StableArenaWarning
from stablearena.judging.anonymity import WELL_KNOWN_NAMES, identity_names, names_mentioned
from stablearena.judging.endpoints.config import endpoint_from_mapping
from stablearena.judging.endpoints.demo_server import DemoServer

NAMES = identity_names([("demo-solid", ["Solid One"], "Demo Labs")])
_LETTERS = st.text(alphabet="abcdefghijklmnopqrstuvwxyzé0123456789", min_size=1, max_size=6)
_SEP = st.text(alphabet=" \n\t,.;:!?()[]\"'", min_size=1, max_size=3)
_WORDS = st.lists(st.sampled_from(["the", "answer", "is", "42", "model", "a", "i", "am"]))


# ---------------------------------------------------------------------------------- detector
@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(NAMES), before=_LETTERS, after=_LETTERS)
def test_a_name_inside_a_word_is_not_a_mention(name, before, after):
    text = f"{before}{name}{after}"
    # only names that are themselves whole words of this text may be found
    for found in names_mentioned(text, NAMES):
        assert found != name


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    case=st.sampled_from(["upper", "lower", "title", "swap", "fullwidth", "zwsp"]),
    left=_SEP,
    right=_SEP,
    words=_WORDS,
)
def test_case_and_unicode_variants_of_a_name_are_found(name, case, left, right, words):
    variant = {
        "upper": name.upper(),
        "lower": name.lower(),
        "title": name.title(),
        "swap": name.swapcase(),
        # full-width forms (NFKC folds them back)
        "fullwidth": "".join(
            chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c
            for c in unicodedata.normalize("NFC", name)
        ),
        # a zero-width space inside the name (invisible: removed before matching)
        "zwsp": name[:1] + "\u200b" + name[1:],
    }[case]
    text = " ".join(words) + left + variant + right + " ".join(words)
    assert name in names_mentioned(text, NAMES)


def test_detector_examples_and_separators():
    assert names_mentioned("I am ChatGPT, trained by OpenAI.", NAMES) == ["ChatGPT", "OpenAI"]
    assert names_mentioned("gpt 4o and GPT4o", NAMES) == ["GPT-4o"]
    assert names_mentioned("llamas, GPT-40, demo-solidity, claudette", NAMES) == []
    assert names_mentioned("built by demo labs (solid-one)", NAMES) == ["Demo Labs", "Solid One"]
    assert names_mentioned("The answer is 42.", NAMES) == []
    assert names_mentioned("Claude", ()) == []
    assert set(WELL_KNOWN_NAMES) <= set(NAMES)
    assert identity_names([("m", [], None)], well_known=False) == ()  # too short a word
    assert identity_names([("abc", ["x", "Abc-2"], "ab")], ["q"], well_known=False) == (
        "Abc-2",
        "abc",
        "q",
    )


def test_endpoint_aliases_and_organisation_are_validated_by_the_endpoint_validator():
    base = {"name": "gpt", "base_url": "http://127.0.0.1:1/v1", "model": "gpt"}
    ep = endpoint_from_mapping({**base, "aliases": ["ChatGPT"], "organisation": "OpenAI"}, "m")
    assert ep.aliases == ("ChatGPT",) and ep.organisation == "OpenAI"
    assert ep.to_record()["aliases"] == ["ChatGPT"]
    with pytest.raises(InputError, match=r"aliases\[1\].*U\+202E"):
        endpoint_from_mapping({**base, "aliases": ["ok", "bad\u202ename"]}, "m")
    with pytest.raises(InputError, match="aliases must be a list"):
        endpoint_from_mapping({**base, "aliases": "ChatGPT"}, "m")
    with pytest.raises(InputError, match="organisation"):
        endpoint_from_mapping({**base, "organisation": ""}, "m")


def test_language_is_guessed_from_scripts_and_common_english_words():
    assert language_of("What is the capital of France?") == "English"
    assert language_of("What is 17*23?") == "English"
    assert language_of("日本の首都はどこですか") == "Japanese"
    assert language_of("中国的首都是哪里") == "Chinese"
    assert language_of("한국의 수도는 어디입니까") == "Korean"
    assert language_of("Quelle est la capitale de la France ?") == "unknown"
    assert language_of("Какая столица России?") == "unknown"
    assert language_of("17*23") == "unknown"


# ---------------------------------------------------------------------------------- reader
def test_rank_reader_leaves_out_non_anonymous_rows_unless_asked(tmp_path):
    rows = [
        {"model_a": "x", "model_b": "y", "winner": "model_a", "anony": True},
        {"model_a": "x", "model_b": "z", "winner": "model_b", "anony": False},
        {"model_a": "y", "model_b": "z", "winner": "tie", "anony": None},
    ]
    for fmt in ("jsonl", "csv", "parquet"):
        path = tmp_path / f"log.{fmt}"
        df = pd.DataFrame(rows)
        getattr(df, {"jsonl": "to_json", "csv": "to_csv", "parquet": "to_parquet"}[fmt])(
            path, **({"orient": "records", "lines": True} if fmt == "jsonl" else {"index": False})
        )
        with pytest.warns(StableArenaWarning, match="left out 1 of 3 battles with anony = false"):
            assert len(read_battles(path)) == 2, fmt
        assert len(read_battles(path, keep_non_anony=True)) == 3, fmt
        with pytest.warns(StableArenaWarning, match="left out 1 of 3 battles"):
            assert read_counts(path).n_comparisons == 2, fmt
        assert read_counts(path, keep_non_anony=True).n_comparisons == 3, fmt
    bad = pd.DataFrame([{**rows[0], "anony": "maybe"}])
    with pytest.raises(InputError, match="anony is 'maybe'"):
        read_battles(bad)
    with pytest.raises(InputError, match="--keep-non-anony"):
        read_battles(pd.DataFrame([rows[1]]))


# ---------------------------------------------------------------------------------- the arena
@pytest.fixture(scope="module")
def demo():
    with DemoServer(seed=0) as server:
        yield server


CONFIG = """seed = 0
poll_seconds = 0.05
fit_in_process = false
rate_limit = 1000000
rate_burst = 1000000
[arena]
min_records = 0
refit_votes = 1
refit_seconds = 0.1
ability_threshold = 0.0
ability_cap = 0.0
trust_ramp_votes = 0.0
[arena_page]
visitor_battles_per_hour = 100000
address_battles_per_hour = 100000
"""


def _page_battle(client: httpx.Client, url: str, csrf: str, prompt: str) -> dict:
    r = client.post(
        url + "/arena/battles",
        json={"prompt": prompt},
        headers={"X-CSRF-Token": csrf, "Origin": url},
    )
    assert r.status_code == 200, r.text
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert lines[-1]["status"] == "complete", lines[-1]
    return lines[0]


def test_a_self_naming_model_is_exported_non_anonymous_and_left_off_the_default_board(
    tmp_path, demo, cli
):
    """A real ``serve`` process holds page battles between three demo models and
    ``demo-selfnamed`` ("I am ChatGPT, … trained by OpenAI"): every vote of a battle with it is
    exported with ``anony: false`` and absent from the default board (counted per model at
    /v1/admin/anonymity; kept by ``?anony=all``); the export read back by ``stablearena rank``
    gives the live board to 0.01 Elo."""
    models = ("demo-ace", "demo-fair", "demo-wild", "demo-selfnamed")
    rng = np.random.default_rng(0)
    with (
        page_server(tmp_path, demo.base_url, models, 0.0, CONFIG) as server,
        httpx.Client(timeout=60) as page,
    ):
        url, admin = server.url, {"Authorization": f"Bearer {server.admin_key}"}
        csrf = re.search(r'name="csrf-token" content="([0-9a-f]+)"', page.get(url + "/arena").text)
        csrf = csrf.group(1)
        voted = []
        for k in range(24):
            bid = _page_battle(page, url, csrf, f"What is {k + 2}*{k + 3}?")["battle_id"]
            outcome = ["model_a", "model_b", "tie"][int(rng.integers(3))]
            r = page.post(
                f"{url}/arena/battles/{bid}/vote",
                json={"outcome": outcome},
                headers={"X-CSRF-Token": csrf, "Origin": url},
            )
            assert r.status_code == 200, r.text
            voted.append(r.json())
        named = [v for v in voted if "demo-selfnamed" in (v["model_a"], v["model_b"])]
        assert 0 < len(named) < len(voted)
        # the voter is told when a vote will not count, and why (issue 42)
        assert all(v["counts"] is False and "named a model" in v["why"] for v in named)
        assert all(v["counts"] is True and "why" not in v for v in voted if v not in named)
        # the export: FastChat's public schema, anony false exactly for the self-named battles
        raw = httpx.get(url + "/v1/export?texts=true", headers=admin, timeout=60).content
        df = pd.read_json(io.BytesIO(raw), lines=True, dtype=False)
        selfnamed = (df["model_a"] == "demo-selfnamed") | (df["model_b"] == "demo-selfnamed")
        assert (df["anony"] == ~selfnamed).all() and (~df["anony"]).sum() == len(named)
        row = df[selfnamed].iloc[0]
        side = "a" if row["model_a"] == "demo-selfnamed" else "b"
        assert row[f"conversation_{side}"] == [
            {"role": "user", "content": row["prompt_text"]},
            {"role": "assistant", "content": row[f"answer_{side}"]},
        ]
        assert "ChatGPT" in row[f"answer_{side}"]
        assert set(df["turn"]) == {1} and set(df["language"]) == {"English"}
        assert {"winner", "judge", "tstamp", "model_a", "model_b"} <= set(df.columns)
        # counted per model for the admin
        counts = httpx.get(url + "/v1/admin/anonymity", headers=admin).json()["models"]
        by = {c["model"]: c for c in counts}
        assert by["demo-selfnamed"]["battles"] == len(named)
        assert by["demo-selfnamed"]["votes_left_out"] == len(named)
        assert by["demo-selfnamed"]["names"] == {"ChatGPT": len(named), "OpenAI": len(named)}
        with httpx.Client(base_url=url, timeout=60) as op:  # and in the admin view
            assert op.post("/admin/login", data={"key": server.admin_key}).status_code == 303
            view = op.get("/admin").text
        assert "Answers that named a model" in view
        assert re.search(rf"<td>demo-selfnamed</td><td class=\"num\">{len(named)}</td>", view)
        # the default board leaves those votes out; ?anony=all keeps them
        n_anony = len(voted) - len(named)
        deadline = time.time() + 60
        while True:
            live = httpx.get(url + "/v1/leaderboard?method=m-elo").json()
            if live.get("n_battles") == n_anony or time.time() > deadline:
                break
            time.sleep(0.1)
        assert live["n_battles"] == n_anony
        assert "demo-selfnamed" not in {m["model"] for m in live["models"]}
        every = httpx.get(url + "/v1/leaderboard?method=m-elo&anony=all").json()
        assert every["n_battles"] == len(voted)
        assert "demo-selfnamed" in {m["model"] for m in every["models"]}
        live_am = httpx.get(url + "/v1/leaderboard?method=am-elo").json()
    # export → `stablearena rank` on it: the same board (non-anonymous rows left out by default)
    path = tmp_path / "votes.jsonl"
    path.write_bytes(raw)
    for method, board, flags in (
        ("m-elo", live, []),
        ("am-elo", live_am, ["--min-records", "0", "--ability-threshold", "0"]),
        ("m-elo", every, ["--keep-non-anony"]),
    ):
        code, out, err = cli("rank", path, "--method", method, "--format", "json", *flags)
        assert code == 0, err
        said = f"left out {len(named)} of {len(voted)} battles with anony = false"
        assert (said in " ".join(err.split())) == (not flags or "--keep-non-anony" not in flags)
        offline = json.loads(out)
        assert offline["n_battles"] == board["n_battles"]
        rated = {m["model"]: m["rating"] for m in offline["models"]}
        assert rated.keys() == {m["model"] for m in board["models"]}
        for m in board["models"]:
            assert abs(m["rating"] - rated[m["model"]]) < 0.01, (method, m)
