"""Run directories (issue 44): a file named after a model or judge stays inside its directory
and is read back under its name (item 2); the readers of files from outside refuse what is
not a regular file, bound a file's size, a line's size and a value's depth, and say which
file, line and field is wrong, or which two places repeat each other (item 3)."""

from __future__ import annotations

import json
import os
import re
import string
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stablearena.errors import InputError
from stablearena.inputs import FILE_LIMIT_ENV, LINE_LIMIT_ENV, MAX_DEPTH
from stablearena.judging.arena_hard import (
    name_path,
    read_answers,
    read_board,
    read_judge_settings,
    read_judgments,
    read_questions,
    read_run,
    simulate_run,
    write_run,
)
from stablearena.judging.auto_arena import JsonlJournal, read_prompts, replay_records
from stablearena.judging.endpoints.config import load_toml
from stablearena.judging.endpoints.demo import DEMO_MODELS, demo_prompts
from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.judging.endpoints.offline import read_model_answers


@pytest.fixture(scope="module")
def server():
    with DemoServer(seed=0) as s:
        yield s


def _auto(cli, server, tmp_path: Path, models: list[str], judges: list[str], ah: Path):
    """``auto --design baseline --arena-hard-dir AH`` with demo models and judges renamed:
    ``models[k]`` is served by the k-th demo model, the first is the baseline. The config
    files and the board go to ``tmp_path/cfg``."""
    tmp_path = tmp_path / "cfg"
    tmp_path.mkdir()
    (tmp_path / "models.toml").write_text(
        "".join(
            f"[[models]]\nname = {json.dumps(n)}\nbase_url = {json.dumps(server.base_url)}\n"
            f'model = "{m.name}"\n\n'
            for n, m in zip(models, DEMO_MODELS, strict=False)
        )
    )
    (tmp_path / "judges.toml").write_text(
        "".join(
            f"[[judges]]\nname = {json.dumps(n)}\nbase_url = {json.dumps(server.base_url)}\n"
            f'model = "{j}"\n\n'
            for n, j in zip(judges, ("judge-keen", "judge-fair"), strict=False)
        )
    )
    (tmp_path / "prompts.jsonl").write_text(
        "\n".join(json.dumps(p) for p in demo_prompts(8, seed=5))
    )
    out = tmp_path / "board.json"
    args = ["auto", tmp_path / "prompts.jsonl", "--models", tmp_path / "models.toml",
            "--judges", tmp_path / "judges.toml", "--design", "baseline", "--baseline",
            models[0], "--budget", "40", "--arena-hard-dir", ah, "-o", out]  # fmt: skip
    return (*cli(*args), out)


def _files(top: Path) -> set[Path]:
    return {p for p in top.rglob("*") if p.is_file()}


# ---------------------------------------------------------------------------------- item 2
def test_a_model_named_dot_dot_writes_nothing_outside(cli, server, tmp_path):
    ah = tmp_path / "a" / "b" / "ah"
    code, _, err, _ = _auto(cli, server, tmp_path, ["demo-ace", "../../../x"], ["keen"], ah)
    assert code == 2 and "internal error" not in err, err
    assert "'../../../x' has a part '..'" in err
    assert _files(tmp_path) == _files(tmp_path / "cfg")  # nothing written but the configs


def test_an_absolute_judge_name_writes_nothing_outside(cli, server, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    judge = str(elsewhere / "judge")
    code, _, err, _ = _auto(
        cli, server, tmp_path, ["demo-ace", "demo-fair"], [judge], tmp_path / "ah"
    )
    assert code == 2 and "internal error" not in err, err
    assert "has an empty part (a leading /, an absolute name" in err
    assert list(elsewhere.iterdir()) == []


def test_a_symbolic_link_out_of_the_run_directory_is_refused(tmp_path):
    run = simulate_run([1000, 1100], 5, seed=1)
    outside = tmp_path / "outside"
    outside.mkdir()
    ah = tmp_path / "ah"
    ah.mkdir()
    (ah / "model_answer").symlink_to(outside)  # a directory link out
    with pytest.raises(
        InputError, match=r"resolves to .*outside/model_0\.jsonl, outside .*ah \(a symbolic link"
    ):
        write_run(run, ah)
    assert list(outside.iterdir()) == []
    (ah / "model_answer").unlink()
    (ah / "model_answer").mkdir()
    target = outside / "secret.jsonl"
    target.write_text("keep me\n")
    (ah / "model_answer" / "model_1.jsonl").symlink_to(target)  # a file link out
    with pytest.raises(InputError, match=r"model_1\.jsonl: the file of 'model_1' resolves"):
        write_run(run, ah)
    assert target.read_text() == "keep me\n"
    (ah / "model_answer" / "model_1.jsonl").unlink()
    inside = ah / "kept.jsonl"
    (ah / "model_answer" / "model_1.jsonl").symlink_to(inside)  # a link inside: written
    write_run(run, ah)
    assert read_answers(inside)[0].model == "model_1"
    (ah / "model_answer" / "model_1.jsonl").unlink()
    os.mkfifo(ah / "model_answer" / "model_1.jsonl")  # writing it would wait for a reader
    with pytest.raises(
        InputError, match=r"model_1\.jsonl: the file of 'model_1' exists and is not"
    ):
        write_run(run, ah)


def test_a_name_with_a_slash_round_trips_into_the_board(cli, server, tmp_path):
    """Hugging Face names and a judge ``openai/gpt-4o``: each model's file by its short name
    (Arena-Hard-Auto reads ``model_answer/*.jsonl`` only; its show_result.py shows
    ``split('/')[-1]``), the judge's directory nested (its ``-j openai/gpt-4o``), the full
    names in the records, read back, every model on the board."""
    ah = tmp_path / "ah"
    models = ["meta-llama/Llama-3-8B", "demo-sharp", "mistralai/Mistral-7B/v0.3"]
    code, _, err, out = _auto(cli, server, tmp_path, models, ["openai/gpt-4o"], ah)
    assert code == 0, err
    assert (ah / "model_answer" / "Llama-3-8B.jsonl").is_file()
    assert (ah / "model_answer" / "v0.3.jsonl").is_file()
    jfile = ah / "model_judgment" / "openai" / "gpt-4o" / "v0.3.jsonl"
    assert json.loads(jfile.read_text().splitlines()[0])["model"] == "mistralai/Mistral-7B/v0.3"
    board = json.loads(out.read_text())["arena_hard"]["boards"][0]
    assert {m["model"] for m in board["models"]} == set(models)
    run = read_run(ah)
    assert set(run.answers) == set(models) and list(run.judgments) == ["openai/gpt-4o"]
    code, again, err = cli("arena-hard", ah, "--judge", "openai/gpt-4o", "--rounds", "5")
    assert code == 0 and "meta-llama/Llama-3-8B" in again, err


def test_a_v01_judgment_without_judge_is_its_directory_s(tmp_path):
    """A record without ``judge``: the judge is the directory path less the model's part
    (a file nested by the model's full name, or named by its short name)."""
    d = tmp_path / "model_judgment" / "openai" / "gpt-4o" / "meta-llama"
    d.mkdir(parents=True)
    rec = {"question_id": "q", "model": "meta-llama/L3", "games": [{"score": "A>B"}, None]}
    (d / "L3.jsonl").write_text(json.dumps(rec) + "\n")
    got = read_judgments(d / "L3.jsonl", baseline="b", root=tmp_path / "model_judgment")
    assert got[0].judge == "openai/gpt-4o"
    (d.parent / "L3.jsonl").write_text(json.dumps(rec) + "\n")
    got = read_judgments(d.parent / "L3.jsonl", baseline="b", root=tmp_path / "model_judgment")
    assert got[0].judge == "openai/gpt-4o"


def test_names_that_would_be_one_file_are_an_error(tmp_path):
    run = simulate_run([1000, 1100, 900], 3, names=["b", "x/m", "y/m"], judge="a", seed=1)
    with pytest.raises(InputError, match=r"the answers of 'y/m' and the answers of 'x/m' would"):
        write_run(run, tmp_path)
    nested = simulate_run([1000, 1100], 3, names=["b", "m"], judge="a.jsonl/n", seed=1)
    write_run(nested, tmp_path / "ok")  # a judge's directory may end in .jsonl
    assert (tmp_path / "ok" / "model_judgment" / "a.jsonl" / "n" / "m.jsonl").is_file()
    assert read_run(tmp_path / "ok").judgments.keys() == {"a.jsonl/n"}


_NAME_CHARS = st.one_of(
    st.sampled_from(["/", ".", "..", "\x00", "\\", " ", "\u202e", "\u00e9", "e\u0301", "\n"]),
    st.characters(codec="utf-8"),
    st.sampled_from(string.ascii_letters),
)
_WILD = st.lists(_NAME_CHARS, min_size=0, max_size=12).map("".join)
_PART = st.text(string.ascii_letters + string.digits + "-_. \u00e9", min_size=1, max_size=6)
_HF = st.lists(_PART, min_size=1, max_size=3).map("/".join)  # mostly valid: org/model/…
_NAMES = st.one_of(_HF, _HF, _WILD)
_RUN_NAMES = st.one_of(*[_HF] * 9, _WILD)  # a run's names: most of them valid
PROPERTY = {"examples": 0, "seconds": 0.0}


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(_NAMES, min_size=1, max_size=4, unique=True))
def test_every_name_path_is_inside_its_directory_and_distinct(tmp_path, names):
    """Any names: each path is a refusal (InputError) or lies inside the directory with every
    link resolved; two distinct names never share a file, nor is one's file the other's
    directory."""
    started = time.perf_counter()
    base = tmp_path / "run" / "model_answer"
    real = os.path.realpath(tmp_path / "run")
    paths: dict[str, Path] = {}
    for name in names:
        try:
            path = name_path(base, name, within=tmp_path / "run")
        except InputError:
            continue
        assert os.path.commonpath([real, os.path.realpath(path)]) == real
        assert base in path.parents and ".." not in path.relative_to(base).parts
        paths[name] = path
    for a, pa in paths.items():
        for b, pb in paths.items():
            if a != b:
                assert pa != pb and pa not in pb.parents
    PROPERTY["examples"] += 1
    PROPERTY["seconds"] += time.perf_counter() - started
    print(f"name paths: {PROPERTY['examples']} examples, {PROPERTY['seconds']:.2f} s")


ROUND_TRIP = {"examples": 0, "tries": 0, "refused": 0, "seconds": 0.0}


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(_RUN_NAMES, min_size=2, max_size=3, unique=True), judge=_RUN_NAMES)
def test_written_names_are_read_back(tmp_path, names, judge):
    """A run written under any names is written inside its directory and read back with the
    same models and judge, or refused with an InputError before anything lands outside."""
    started = time.perf_counter()
    d = tmp_path / f"r{ROUND_TRIP['tries']}"  # a new directory for each example
    ROUND_TRIP["tries"] += 1
    outside = _files(tmp_path)
    try:
        run = simulate_run([1000.0] * len(names), 2, names=names, judge=judge, seed=0)
    except InputError:
        return
    try:
        write_run(run, d)
    except InputError:
        ROUND_TRIP["refused"] += 1
    else:
        back = read_run(d)
        assert set(back.answers) == set(names) and list(back.judgments) == [judge]
        assert sum(len(v) for v in back.answers.values()) == 2 * len(names)
        assert {j.model for j in back.judgments[judge]} == set(names[1:])
    assert _files(tmp_path) - _files(d) == outside  # nothing outside d
    ROUND_TRIP["examples"] += 1
    ROUND_TRIP["seconds"] += time.perf_counter() - started
    print(
        f"run round trips: {ROUND_TRIP['examples']} examples ({ROUND_TRIP['refused']} refused), "
        f"{ROUND_TRIP['seconds']:.2f} s"
    )


# ---------------------------------------------------------------------------------- item 3
def _run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    write_run(simulate_run([1000, 1100, 950], 4, seed=3), d)
    return d


def _set_line(path: Path, k: int, line: str) -> None:
    lines = path.read_text().splitlines()
    lines[k] = line
    path.write_text("\n".join(lines) + "\n")


def _clean_exit(code: int, err: str) -> None:
    assert code == 2, err
    assert "internal error" not in err and "Traceback" not in err


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 200_000])
def test_deeply_nested_json_is_a_clear_error(cli, tmp_path, depth):
    d = _run_dir(tmp_path)
    f = d / "model_answer" / "model_1.jsonl"
    rec = json.loads(f.read_text().splitlines()[0])
    line = json.dumps(rec)[:-1] + ', "extra": ' + "[" * depth + "]" * depth + "}"
    _set_line(f, 0, line)
    code, _, err = cli("arena-hard", d, "--rounds", "5")
    _clean_exit(code, err)
    assert "model_1.jsonl, line 1: the value is nested deeper than 64 levels" in err


def test_a_string_where_a_count_belongs_is_a_clear_error(cli, tmp_path):
    d = _run_dir(tmp_path)
    f = d / "model_answer" / "model_2.jsonl"
    rec = json.loads(f.read_text().splitlines()[1])
    rec["metadata"]["header_count"]["h2"] = "3"
    _set_line(f, 1, json.dumps(rec))
    code, _, err = cli("arena-hard", d, "--rounds", "5")
    _clean_exit(code, err)
    assert "model_2.jsonl, line 2: the answer's field metadata.header_count = {" in err
    assert "is not a non-negative count" in err


def _config_files(tmp_path: Path) -> dict:
    """Each reader of a file from outside, and a good file for it."""
    d = _run_dir(tmp_path)
    (tmp_path / "s.yaml").write_text(
        "judge_model: j\nprompt_template: '{QUESTION} {ANSWER_A} {ANSWER_B}'\n"
    )
    (tmp_path / "b.csv").write_text("model,score,lower,upper\nm,1,0,2\n")
    (tmp_path / "m.toml").write_text('[[models]]\nname = "m"\n')
    (tmp_path / "p.jsonl").write_text('{"id": "a", "prompt": "x"}\n')
    (tmp_path / "j.jsonl").write_text('{"type": "x"}\n')
    from stablearena.service.settings import load_settings

    return {
        "question": (read_questions, d / "question.jsonl"),
        "answer": (read_answers, d / "model_answer" / "model_1.jsonl"),
        "judgment": (read_judgments, d / "model_judgment" / "sim-judge" / "model_1.jsonl"),
        "offline answers": (read_model_answers, d / "model_answer" / "model_1.jsonl"),
        "judge settings": (read_judge_settings, tmp_path / "s.yaml"),
        "reference board": (read_board, tmp_path / "b.csv"),
        "models.toml": (load_toml, tmp_path / "m.toml"),
        "arena.toml": (load_settings, tmp_path / "m.toml"),
        "prompts": (read_prompts, tmp_path / "p.jsonl"),
        "journal": (lambda p: replay_records(JsonlJournal(p)), tmp_path / "j.jsonl"),
    }


READERS = [
    "question", "answer", "judgment", "offline answers", "judge settings", "reference board",
    "models.toml", "arena.toml", "prompts", "journal",
]  # fmt: skip


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_only_regular_files_are_read(tmp_path, reader, kind):
    """A FIFO (nobody writing: reading it would wait for ever), a link to /dev/zero (reading
    it would never end) and a directory: refused before anything is read."""
    read, path = _config_files(tmp_path)[reader]
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
        said = "is a FIFO (named pipe), not a regular file"
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
        said = "is a device (a symbolic link to /dev/zero), not a regular file"
    else:
        path.mkdir()
        said = "is a directory, not a regular file"
    with pytest.raises(InputError, match=re.escape(f"{path}: the ") + ".*" + re.escape(said)):
        read(path)


@pytest.mark.parametrize("reader", READERS)
def test_the_file_size_limit(tmp_path, monkeypatch, reader):
    read, path = _config_files(tmp_path)[reader]
    monkeypatch.setenv(FILE_LIMIT_ENV, "10")
    with pytest.raises(
        InputError, match=f"larger than the limit of 10 bytes.*set {FILE_LIMIT_ENV}"
    ):
        read(path)
    monkeypatch.setenv(FILE_LIMIT_ENV, str(path.stat().st_size))
    read(path)  # at the limit: read
    monkeypatch.setenv(FILE_LIMIT_ENV, "ten")
    with pytest.raises(InputError, match=f"{FILE_LIMIT_ENV}='ten': must be a whole number"):
        read(path)


def test_the_line_size_limit(tmp_path, monkeypatch):
    d = _run_dir(tmp_path)
    f = d / "model_answer" / "model_1.jsonl"
    longest = max(len(x.encode()) for x in f.read_text().splitlines())
    monkeypatch.setenv(LINE_LIMIT_ENV, str(longest))
    assert len(read_answers(f)) == 4
    monkeypatch.setenv(LINE_LIMIT_ENV, str(longest - 1))
    with pytest.raises(
        InputError,
        match=rf"line \d: the line is {longest} bytes, more than the limit of "
        rf"{longest - 1} for one answer record; set {LINE_LIMIT_ENV}",
    ):
        read_run(d)


def test_a_judgment_repeated_in_one_file_names_both_lines(tmp_path):
    d = _run_dir(tmp_path)
    f = d / "model_judgment" / "sim-judge" / "model_1.jsonl"
    lines = f.read_text().splitlines()
    f.write_text("\n".join([*lines, lines[1]]) + "\n")
    with pytest.raises(
        InputError,
        match=rf"{f}, line 5: a second judgment by 'sim-judge' of 'model_1' against "
        rf"'model_0' on question 'q0001' \(the first: {f}, line 2\)",
    ):
        read_run(d)


def test_a_judgment_repeated_in_two_files_names_both(tmp_path):
    d = _run_dir(tmp_path)
    f = d / "model_judgment" / "sim-judge" / "model_1.jsonl"
    copy = d / "model_judgment" / "sim-judge" / "old" / "model_1.jsonl"
    copy.parent.mkdir()
    copy.write_text(f.read_text().splitlines()[2] + "\n")
    with pytest.raises(InputError, match=rf"{f}, line 3.*\(the first: {copy}, line 1\)|"
                       rf"{copy}, line 1.*\(the first: {f}, line 3\)"):  # fmt: skip
        read_run(d)


def test_two_answer_files_of_one_model_name_both(tmp_path):
    d = _run_dir(tmp_path)
    f = d / "model_answer" / "model_1.jsonl"
    (d / "model_answer" / "model_1-copy.jsonl").write_text(f.read_text())
    with pytest.raises(InputError, match=rf"model_1\.jsonl: answers of model 'model_1', whose "
                       rf"answers are in {d / 'model_answer' / 'model_1-copy.jsonl'} too"):  # fmt: skip
        read_run(d)
    (d / "model_answer" / "model_1-copy.jsonl").unlink()
    lines = f.read_text().splitlines()
    f.write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(InputError, match=rf"line 5: a second answer of 'model_1' to question "
                       rf"'q0000' \(the first: {f}, line 1\)"):  # fmt: skip
        read_run(d)


def test_answers_of_two_models_in_one_file_are_an_error(tmp_path):
    d = _run_dir(tmp_path)
    f = d / "model_answer" / "model_1.jsonl"
    rec = json.loads(f.read_text().splitlines()[3])
    rec["model"] = "model_9"
    _set_line(f, 3, json.dumps(rec))
    with pytest.raises(InputError, match=r"line 4: an answer of model 'model_9' in the file of"):
        read_run(d)


_WRONG = [
    ("question.jsonl", 0, ("uid",), [1], "the question's field 'uid' must be a string"),
    ("question.jsonl", 1, ("category",), 5, "the question's field 'category' must be a string"),
    ("model_answer/model_1.jsonl", 0, ("model",), 3, "the answer's field 'model' must be"),
    ("model_answer/model_1.jsonl", 0, ("messages",), "hi", "the answer's field 'messages' must be a list"),
    ("model_answer/model_1.jsonl", 2, ("metadata",), "x", "the answer's field 'metadata' must be an object"),
    ("model_answer/model_1.jsonl", 1, ("metadata", "token_len"), "9",
     "the answer's field metadata.token_len = \"9\" is not a non-negative count"),
    ("model_answer/model_1.jsonl", 1, ("metadata", "bold_count"), {"**": True},
     "the answer's field metadata.bold_count = {\"**\": true} is not"),
    ("model_judgment/sim-judge/model_2.jsonl", 0, ("games",), [1, 2],
     "the judgment's field games[0] must be an object"),
    ("model_judgment/sim-judge/model_2.jsonl", 1, ("games",), {"a": 1},
     "the judgment's field 'games' must be a list"),
    ("model_judgment/sim-judge/model_2.jsonl", 2, ("baseline",), ["b"],
     "the judgment's field 'baseline' must be a model's name"),
    ("model_judgment/sim-judge/model_2.jsonl", 3, ("judge",), {"j": 1},
     "the judgment's field 'judge' must be a model's name"),
]  # fmt: skip


@pytest.mark.parametrize(("file", "line", "field", "value", "said"), _WRONG)
def test_a_wrongly_typed_field_names_file_line_and_field(tmp_path, file, line, field, value, said):
    d = _run_dir(tmp_path)
    f = d / file
    rec = json.loads(f.read_text().splitlines()[line])
    node = rec
    for key in field[:-1]:
        node = node[key]
    node[field[-1]] = value
    _set_line(f, line, json.dumps(rec))
    with pytest.raises(InputError, match=re.escape(f"{f}, line {line + 1}: {said}")):
        read_run(d).battles()


def test_wrongly_typed_judge_settings_are_clear_errors(tmp_path):
    f = tmp_path / "s.yaml"
    base = {"judge_model": "j", "prompt_template": "{QUESTION} {ANSWER_A} {ANSWER_B}"}
    for key, value, said in [
        ("regex_patterns", [1], "regex_patterns must be a list of regexes, not [1]"),
        ("model_list", "abc", 'model_list must be a list of names, not "abc"'),
        ("judge_model", 5, "judge_model must be a model's name, not 5"),
        ("temperature", True, "temperature must be a number, not True"),
        ("prompt_template", {"a": 1}, "prompt_template must be a template"),
    ]:
        f.write_text(yaml.safe_dump({**base, key: value}))
        with pytest.raises(InputError, match=re.escape(f"{f}: {said}")):
            read_judge_settings(f)
    f.write_text("a: " + "[" * 100 + "]" * 100 + "\n")
    with pytest.raises(InputError, match="nested deeper than 64 levels|nest too deeply"):
        read_judge_settings(f)


# ---------------------------------------------------------------------------------- fuzzing
_KEYS = ["uid", "question_id", "prompt", "turns", "category", "model", "model_id", "messages",
         "role", "content", "answer", "choices", "metadata", "conv_metadata", "token_len",
         "header_count", "list_count", "bold_count", "h1", "**", "games", "score", "judge",
         "baseline", "judgment"]  # fmt: skip
_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=6),
    st.sampled_from(["A>B", "B>>A", "A=B", "assistant", "user", "m", "b", "q1", "j", "../x", "/"]),
)
_VALUE = st.recursive(
    _LEAF,
    lambda c: st.one_of(
        st.lists(c, max_size=3),
        st.dictionaries(st.sampled_from(_KEYS) | st.text(max_size=3), c, max_size=5),
    ),
    max_leaves=20,
)
_GOOD = {
    "question": {"uid": "q1", "category": "c", "prompt": "Why?"},
    "answer": {"uid": "q1", "model": "m", "messages": [{"role": "user", "content": "Why?"},
               {"role": "assistant", "content": {"answer": "# A\n**b**"}}],
               "metadata": {"token_len": 5, "header_count": {"h1": 1}, "list_count": {},
                            "bold_count": {"**": 1}}},
    "judgment": {"uid": "q1", "category": "c", "judge": "j", "model": "m", "baseline": "b",
                 "games": [{"score": "A>B"}, {"score": "B>A"}]},
}  # fmt: skip


@st.composite
def _line(draw, kind: str) -> bytes:
    """One line of a ``kind`` file: a good record with fields replaced, added or removed, its
    JSON cut short or wrapped in brackets, or raw bytes."""
    rec = json.loads(json.dumps(_GOOD[kind]))
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        node, path = rec, draw(st.lists(st.sampled_from(_KEYS), min_size=1, max_size=3))
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            if draw(st.booleans()):
                node[path[-1]] = draw(_VALUE)
            else:
                node.pop(path[-1], None)
    text = json.dumps(rec, ensure_ascii=draw(st.booleans())).encode()
    how = draw(st.sampled_from(["as is"] * 5 + ["cut", "wrapped", "bytes"]))
    if how == "cut":
        text = text[: draw(st.integers(0, len(text)))]
    elif how == "wrapped":
        n = draw(st.sampled_from([1, MAX_DEPTH, 2000, 100_000]))
        text = b"[" * n + text + b"]" * n
    elif how == "bytes":
        text = draw(st.binary(max_size=30))
    return text.replace(b"\n", b" ")


FUZZ = {"examples": 0, "clean": 0, "seconds": 0.0}


@settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    questions=st.lists(_line("question"), min_size=1, max_size=3),
    answers=st.lists(_line("answer"), max_size=3),
    judgments=st.lists(_line("judgment"), max_size=3),
)
def test_fuzzed_run_files_give_a_run_or_an_input_error(tmp_path, questions, answers, judgments):
    """Random JSON-ish lines in every file of a run: reading the run and making its battles
    (with and without style) gives a result or an InputError, never another exception."""
    started = time.perf_counter()
    d = tmp_path / f"fuzz{FUZZ['examples']}"
    for rel, lines in (("question.jsonl", questions), ("model_answer/m.jsonl", answers),
                       ("model_judgment/j/m.jsonl", judgments)):  # fmt: skip
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(b"\n".join(lines) + b"\n")
    FUZZ["examples"] += 1
    try:
        run = read_run(d, baseline="b")
        for style in (True, False):
            try:
                run.battles(style=style)
            except InputError:
                pass
        FUZZ["clean"] += 1
    except InputError:
        pass
    FUZZ["seconds"] += time.perf_counter() - started
    print(
        f"fuzz run files: {FUZZ['examples']} examples ({FUZZ['clean']} read), {FUZZ['seconds']:.2f} s"
    )
