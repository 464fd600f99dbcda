"""``auto`` journals read back (issue 32): one reader (:func:`stablearena.judging.auto_arena.replay_records`)
for every journal; duplicated lines counted once, a wrongly typed line a clear error naming the
file and line, a torn last line dropped with a warning. Hypothesis fuzzes all of it at once."""

from __future__ import annotations

import json
import time
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_auto import local_arena

from stablearena.errors import InputError, StableArenaWarning
from stablearena.judging.auto_arena import AutoConfig, JsonlJournal

CONFIG = AutoConfig(budget=8, seed=3)


@pytest.fixture(scope="module")
def journal_lines(tmp_path_factory) -> list[str]:
    """A real journal of a small run (the demo models and judges in-process), as its lines."""
    path = tmp_path_factory.mktemp("journal") / "run.jsonl"
    j = JsonlJournal(path)
    local_arena(CONFIG, journal=j).run()
    j.close()
    return path.read_text().splitlines()


def _replay(path):
    """What a resumed run counts from the journal at ``path`` (nothing new is run)."""
    j = JsonlJournal(path)
    try:
        arena = local_arena(CONFIG, journal=j)
        arena._replay()
        return arena.result
    finally:
        j.close()


def _counts(result) -> tuple:
    return (
        result.calls,
        len(result.judgements),
        result.answers,
        result.answer_failures,
        len(result.probes),
    )


def test_duplicated_journal_lines_are_counted_once(tmp_path, journal_lines):
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(journal_lines) + "\n")
    expected = _counts(_replay(path))
    assert expected[0] == 8 and expected[1] + expected[4] == 4  # battles and probes: 2 calls
    path.write_text("\n".join(journal_lines + journal_lines[1:]) + "\n")  # every record twice
    with pytest.warns(StableArenaWarning, match=f"skipped {len(journal_lines) - 1} duplicated"):
        assert _counts(_replay(path)) == expected
    # a resumed run spends no more than the budget it already spent
    j = JsonlJournal(path)
    with pytest.warns(StableArenaWarning, match="duplicated"):
        r = local_arena(CONFIG, journal=j).run()
    j.close()
    assert r.calls == 8 and len(r.judgements) + len(r.probes) == 4 and r.stop_reason == "budget"


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda rec: {**rec, "calls": "2"}, "'calls' must be a whole number"),
        (
            lambda rec: {k: v for k, v in rec.items() if k != "x"},
            "'x' must be a string, not missing",
        ),
        (lambda rec: {**rec, "prompt_id": 7}, "'prompt_id' must be a string, not 7"),
        (lambda rec: {**rec, "outcome": 1}, "'outcome' must be x, y, tie or null"),
        (lambda rec: 5, "not a journal record"),
        (lambda rec: {**rec, "x": "no-such-model"}, "models not in its run record"),
    ],
    ids=["calls-str", "x-missing", "prompt-int", "outcome-int", "number", "unknown-model"],
)
def test_a_wrongly_typed_journal_line_is_a_clear_error(tmp_path, journal_lines, change, said):
    lines = list(journal_lines)
    k = next(n for n, line in enumerate(lines) if '"type":"judgement"' in line)
    lines[k] = json.dumps(change(json.loads(lines[k])))
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=said) as err:
        _replay(path)
    if said != "models not in its run record":
        assert f"{path}, line {k + 1}:" in str(err.value)


def test_a_torn_last_line_is_dropped_with_a_warning(tmp_path, journal_lines):
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(journal_lines) + "\n")
    expected = _counts(_replay(path))
    path.write_text("\n".join(journal_lines) + "\n" + journal_lines[-1][:-7])
    with pytest.warns(StableArenaWarning, match=f"line {len(journal_lines) + 1}: dropped a last"):
        assert _counts(_replay(path)) == expected


# ---------------------------------------------------------------------------------- fuzzing
_BAD_VALUES = st.sampled_from([None, "2", 2.5, -1, True, [], {}, 1e308, "x" * 300])
_EDIT = st.one_of(
    st.tuples(st.just("dup"), st.integers(0, 10**6)),
    st.tuples(st.just("torn"), st.integers(1, 40)),
    st.tuples(
        st.just("retype"),
        st.integers(0, 10**6),
        st.sampled_from(
            ["calls", "prompt_tokens", "x", "y", "prompt_id", "ok", "model", "judge", "n", "picked"]
        ),
        _BAD_VALUES,
    ),
    st.tuples(
        st.just("drop-field"),
        st.integers(0, 10**6),
        st.sampled_from(["calls", "x", "ok", "picked"]),
    ),
    st.tuples(
        st.just("junk"),
        st.integers(0, 10**6),
        st.one_of(st.integers(), st.text(max_size=20), st.lists(st.integers(), max_size=3)),
    ),
)

FUZZ = {"examples": 0, "seconds": 0.0}


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(edits=st.lists(_EDIT, max_size=6))
def test_fuzz_journals_give_the_right_counts_or_a_clear_error(tmp_path, journal_lines, edits):
    """Random duplicates, wrongly typed or missing fields, junk lines and torn last lines: a
    journal with only duplicates and a torn tail replays to the original counts; any bad line
    is an InputError naming the file and line; never another exception."""
    started = time.perf_counter()
    lines = list(journal_lines)
    bad_line = None  # the first bad line's number, when one is added
    torn = None
    for edit in edits:
        kind, at = edit[0], edit[1] % len(lines) if edit[0] != "torn" else 0
        if kind == "dup":
            lines.insert(at + 1, lines[at])
        elif kind == "torn":
            torn = journal_lines[-1][: -edit[1] % max(1, len(journal_lines[-1]) - 1) or 1]
        elif kind in ("retype", "drop-field"):
            rec = json.loads(lines[at])
            if not isinstance(rec, dict):
                continue  # a junk line added before
            field = edit[2]
            needs = {
                "answer": ("prompt_tokens", "prompt_id", "ok", "model"),
                "judgement": ("calls", "prompt_tokens", "x", "y", "prompt_id", "judge"),
                "probe": ("calls", "prompt_tokens", "n", "picked", "prompt_id", "judge"),
            }.get(rec.get("type"), ())
            if field not in needs:
                continue
            if kind == "retype":
                value = edit[3]
                if field in ("calls", "prompt_tokens", "n") and type(value) is int and value >= 0:
                    continue
                if field == "picked" and isinstance(value, list):
                    if all(isinstance(v, str) for v in value):
                        continue
                if field in ("x", "y", "prompt_id", "model", "judge") and isinstance(value, str):
                    continue
                if field == "ok" and isinstance(value, bool):
                    continue
                rec[field] = value
            else:
                rec.pop(field, None)
            lines[at] = json.dumps(rec)
            bad_line = at
        else:
            if at == 0:
                continue  # before the run record: another kind of test
            lines.insert(at, json.dumps(edit[2]))
            bad_line = at
    path = tmp_path / f"fuzz-{FUZZ['examples']}.jsonl"
    path.write_text("\n".join(lines) + "\n" + (torn or ""))
    FUZZ["examples"] += 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StableArenaWarning)
        if bad_line is None:
            clean = _counts(_replay_clean(tmp_path, journal_lines))
            assert clean[0] == 8 and clean[1] + clean[4] == 4 and clean[3] == 0
            assert _counts(_replay(path)) == clean
        else:
            with pytest.raises(InputError, match=rf"{path}, line \d+: "):
                _replay(path)
    FUZZ["seconds"] += time.perf_counter() - started
    print(f"fuzz journals: {FUZZ['examples']} examples, {FUZZ['seconds']:.2f} s")


def _replay_clean(tmp_path, journal_lines):
    clean = tmp_path / "clean.jsonl"
    if not clean.exists():
        clean.write_text("\n".join(journal_lines) + "\n")
    return _replay(clean)


def test_the_journal_ends_with_the_disagreement_or_why_there_is_none(journal_lines):
    """The small run's judgements leave the models in two groups (its fit is per component):
    its last record is the disagreement record, with no table and a note saying why — the run
    still ends (a DisconnectedGraphError here once failed every test of this file)."""
    last = json.loads(journal_lines[-1])
    judged = [json.loads(x) for x in journal_lines]
    judged = [r for r in judged if r["type"] == "judgement" and r.get("outcome") is not None]
    assert last["type"] == "disagreement" and last["judgements"] == len(judged)
    assert (
        last["models"] == {}
        and last["note"].startswith("no test: ")
        and "component" in last["note"]
    )
