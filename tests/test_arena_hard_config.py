"""Arena-Hard-Auto as its users run it (issue 41, item 4): its judge settings over real HTTP
(its system prompt and template reach the judge; every verdict pattern read as its
``gen_judgment.py`` reads them; its labels and weights in the exported files), its endpoint
and generation settings, names with ``/``, categories, ``--convention arena-hard``, and our
reader on files in its layout for every category of v2.0 and v0.1 (questions copied from its
repository, tests/data/arena_hard)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from stablearena.errors import InputError
from stablearena.judging.arena_hard import (
    ARENA_HARD_PROMPT,
    CATEGORIES,
    CREATIVE_WRITING_PROMPT,
    LABELS,
    apply_judge_settings,
    endpoint_from_settings,
    export_journal,
    prompt_categories,
    read_endpoints,
    read_generation_settings,
    read_judge_settings,
    read_questions,
    read_run,
    self_judged_row,
    simulate_run,
    write_run,
)
from stablearena.judging.auto_arena import AutoArena, AutoConfig, Prompt
from stablearena.judging.endpoints.client import EndpointClient
from stablearena.judging.endpoints.config import ModelEndpoint
from stablearena.judging.endpoints.demo import DEMO_MODELS, demo_prompts
from stablearena.judging.endpoints.demo_server import DemoServer
from stablearena.judging.judges import Judge, JudgeClient, VerdictParser
from stablearena.judging.probes import ProbeConfig

DATA = Path(__file__).parent / "data" / "arena_hard"

# its config/arena-hard-v2.0.yaml, as it ships (no system prompt: that is in its code)
SETTINGS_V2 = r"""judge_model: gpt-4.1
temperature: 0.0
max_tokens: 16000
bench_name: arena-hard-v2.0
reference: null
regex_patterns:
  - \[\[([AB<>=]+)\]\]
  - \[([AB<>=]+)\]
prompt_template: "<|User Prompt|>\n{QUESTION}\n\n<|The Start of Assistant A's Answer|>\n{ANSWER_A}\n<|The End of Assistant A's Answer|>\n\n<|The Start of Assistant B's Answer|>\n{ANSWER_B}\n<|The End of Assistant B's Answer|>"
model_list:
  - deepseek-r1
"""


def their_get_score(judgment: str, patterns: list[str]) -> str | None:
    """Arena-Hard-Auto v2's gen_judgment.get_score, as it is written there."""
    for pattern in patterns:
        pattern = re.compile(pattern)
        matches = pattern.findall(judgment.upper())
        matches = [m for m in matches if m != ""]
        if len(set(matches)) > 0:
            return matches[-1].strip("\n")
    return None


@pytest.fixture(scope="module")
def server():
    with DemoServer(seed=0) as s:
        yield s


def test_the_parser_reads_replies_as_its_get_score(tmp_path):
    (tmp_path / "s.yaml").write_text(SETTINGS_V2)
    s = read_judge_settings(tmp_path / "s.yaml")
    parser = s.parser()
    replies = [
        "My final verdict is [[A>>B]].",
        "[A>B]",
        "so [[a>b]]",
        "[[b>>a]] at first, then [[A=B]]",
        "[[A>B]] but also [B>A]",  # the first pattern that matches decides
        "[B>A] and later [A>B]",
        "see [a] and [[A]]",  # a label show_result.py does not score
        "x[a] in code, then [B<A]",
        "A is better",
        "[[A>B>A]]",
        "",
    ]
    for r in replies:
        theirs = their_get_score(r, list(s.patterns))
        assert parser.label(r) == theirs, r
        # scored when show_result.py scores it, a failed judgement otherwise (it would stop)
        expected = None if theirs not in LABELS else ("A" if LABELS[theirs][0] == 1 else "B")
        if theirs in LABELS and LABELS[theirs][0] == 0.5:
            expected = "tie"
        assert parser.parse(r) == expected, r
    # v0.1's rule: one pattern, case as written, all its matches one label
    old = VerdictParser(r"\[\[([AB<>=]+)\]\]", parser.labels, unique=True)
    assert old.parse("[[A>B]] so [[A>B]]") == "A" and old.parse("[[A>B]] or [[B>A]]") is None
    assert old.parse("[[a>b]]") is None


def _arena(server, judge_model: str, settings, models=DEMO_MODELS[:3], n=8):
    prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(n, seed=4)]
    cats = {p.id: ("creative_writing" if k % 2 else "hard_prompt") for k, p in enumerate(prompts)}
    judge = Judge("gpt-4.1", ModelEndpoint("gpt-4.1", server.base_url, judge_model))
    judge = apply_judge_settings(judge, settings, cats, "hard_prompt")
    clients = [EndpointClient(ModelEndpoint(m.name, server.base_url, m.name)) for m in models]
    base = models[1].name
    cfg = AutoConfig(
        budget=4 * n * (len(models) - 1),
        design="baseline",
        baseline=base,
        probes=ProbeConfig(share=0),
    )
    arena = AutoArena(clients, [JudgeClient(judge)], prompts, cfg)
    return arena, arena.run(), prompts, cats, base, judge


@pytest.mark.parametrize("form", ["asked", "single", "lower", "mirror"])
def test_a_judge_over_http_gets_its_prompts_and_its_labels_are_read(tmp_path, server, form):
    """The judge (the demo judge behind the demo server, answering in Arena-Hard-Auto's five
    labels when asked for them, written ``[[A>B]]``, ``[A>B]``, ``[[a>b]]`` or ``[[B<A]]``)
    gets each category's system prompt and its template; every verdict is read as its
    get_score reads it; the exported files carry its labels, strong ones weighing 3."""
    (tmp_path / "s.yaml").write_text(SETTINGS_V2)
    settings = read_judge_settings(tmp_path / "s.yaml")
    model = f"judge-keen+form={form}+id={form}"
    arena, result, prompts, cats, base, judge = _arena(server, model, settings)
    last = server.stats()[model]["last_messages"]
    assert last[0]["role"] == "system"
    assert last[0]["content"] in (ARENA_HARD_PROMPT, CREATIVE_WRITING_PROMPT)
    assert last[1]["content"].startswith("<|User Prompt|>\n")
    assert "\n<|The End of Assistant B's Answer|>" in last[1]["content"]
    # each prompt's own category's instruction
    assert judge.system_prompts[prompts[1].id] == CREATIVE_WRITING_PROMPT
    assert judge.system_prompts[prompts[0].id] == ARENA_HARD_PROMPT
    assert result.failures == [] and len(result.judgements) > 0
    verdicts = [
        v for r in arena.journal.records() if r.get("type") == "judgement" for v in r["verdicts"]
    ]
    written = {"asked": r"\[\[[AB<>=]+\]\]", "single": r"(?<!\[)\[[AB<>=]+\](?!\])",
               "lower": r"\[\[[ab<>=]+\]\]", "mirror": r"\[\[[AB]<{1,2}[AB]\]\]|\[\[B=A\]\]"}  # fmt: skip
    for v in verdicts:
        assert re.search(written[form], v["reasoning"]), v["reasoning"]
        theirs = their_get_score(v["reasoning"], list(settings.patterns))
        assert theirs in LABELS and judge.parser.parse(v["reasoning"]) == v["winner"]
    out = tmp_path / "ah"
    counts = export_journal(
        arena.journal.records(), prompts, out, baseline=base, categories=cats, parser=judge.parser
    )
    assert counts["games_without_verdict"] == 0
    run = read_run(out)
    labels = [lab for j in run.judgments["gpt-4.1"] for lab in j.labels]
    assert all(lab in LABELS for lab in labels)
    assert any(LABELS[lab][1] for lab in labels)  # strong verdicts occur …
    battles, _ = run.battles(style=False)
    assert 3.0 in set(battles.weights())  # … and weigh 3
    # the categories are the prompts' (not ""), in the questions and the judgments
    assert {q.category for q in run.questions} == {"hard_prompt", "creative_writing"}
    assert all(j.category == cats[j.uid] for j in run.judgments["gpt-4.1"])


def test_a_reply_without_a_label_is_a_failed_judgement(tmp_path, server):
    (tmp_path / "s.yaml").write_text(SETTINGS_V2)
    settings = read_judge_settings(tmp_path / "s.yaml")
    _, result, *_ = _arena(server, "judge-keen+form=none", settings, n=3)
    assert result.failures and {f["reason"] for f in result.failures} == {"unparseable"}
    assert len(result.failures) == len(result.judgements)


def test_settings_name_the_category_they_lack(tmp_path):
    (tmp_path / "s.yaml").write_text(
        SETTINGS_V2
        + "judge_settings:\n  hard_prompt:\n    baseline: m0\n    system_prompt: Judge [[A>>B]].\n"
    )
    s = read_judge_settings(tmp_path / "s.yaml")
    assert s.category("hard_prompt").baseline == "m0"
    with pytest.raises(InputError, match=r"s\.yaml: no judge settings for category 'math'"):
        s.category("math")
    (tmp_path / "r.yaml").write_text(SETTINGS_V2.replace("reference: null", "reference: [m1]"))
    r = read_judge_settings(tmp_path / "r.yaml")
    assert r.reference == ("m1",)
    with pytest.raises(InputError, match=r"r\.yaml: reference answers"):
        apply_judge_settings(Judge("j", ModelEndpoint("j", "http://x/v1", "j")), r)


API_CONFIG = """gpt-4.1:
    model: gpt-4.1
    endpoints: null
    api_type: openai
    parallel: 64
    max_tokens: 32000
    temperature: 0.0

local-ace:
    model: demo-ace
    endpoints:
        - api_base: {base}
          api_key: '-'
    api_type: openai
    parallel: 8
    max_tokens: 800
    temperature: 0.0

gemma-3-27b-it:
    model: demo-fair
    endpoints:
        - api_base: {base}
          api_key: $DEMO_KEY
    api_type: openai
    parallel: 4
    temperature: 0.7

judge:
    model: judge-keen
    endpoints:
        - api_base: {base}
          api_key: '-'
    api_type: openai
    parallel: 8

claude-3-5-sonnet-20241022:
    model: claude-3-5-sonnet-20241022
    endpoints: null
    api_type: anthropic
    parallel: 32
"""


def test_endpoint_and_generation_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    f = tmp_path / "api_config.yaml"
    f.write_text(API_CONFIG.format(base="http://127.0.0.1:9/v1"))
    entries = read_endpoints(f)
    openai = endpoint_from_settings(entries, "gpt-4.1", str(f))
    assert openai.base_url == "https://api.openai.com/v1" and openai.api_key_env == "OPENAI_API_KEY"
    assert openai.params == {"temperature": 0.0, "max_tokens": 32000}
    assert openai.max_concurrency == 64
    local = endpoint_from_settings(entries, "gemma-3-27b-it", str(f), max_tokens=100)
    assert local.base_url == "http://127.0.0.1:9/v1" and local.model == "demo-fair"
    assert local.api_key_env == "DEMO_KEY" and local.params == {
        "temperature": 0.7,
        "max_tokens": 100,
    }
    with pytest.raises(InputError, match=r"api_config\.yaml: claude-3-5-sonnet-20241022\.api_type"):
        endpoint_from_settings(entries, "claude-3-5-sonnet-20241022", str(f))
    with pytest.raises(InputError, match=r"api_config\.yaml: no entry 'nobody'"):
        endpoint_from_settings(entries, "nobody", str(f))
    f.write_text(API_CONFIG.format(base="http://x/v1").replace("$DEMO_KEY", "sk-123"))
    with pytest.raises(
        InputError, match=r"gemma-3-27b-it\.endpoints\[0\]\.api_key: a key is never"
    ):
        endpoint_from_settings(read_endpoints(f), "gemma-3-27b-it", str(f))
    f.write_text(API_CONFIG.format(base="ftp://x"))
    with pytest.raises(InputError, match=r"local-ace\.endpoints\[0\]\.api_base"):
        endpoint_from_settings(read_endpoints(f), "local-ace", str(f))
    g = tmp_path / "gen_answer_config.yaml"
    g.write_text(
        "bench_name: arena-hard-v0.1\ntemperature: 0.0\nmax_tokens: 4096\nmodel_list:\n  - a\n"
    )
    assert read_generation_settings(g) == (
        "arena-hard-v0.1",
        ("a",),
        {"temperature": 0.0, "max_tokens": 4096},
    )
    g.write_text("bench_name: x\nmodel_list: []\n")
    with pytest.raises(InputError, match=r"gen_answer_config\.yaml: model_list"):
        read_generation_settings(g)


def test_auto_from_its_files_over_http(tmp_path, server):
    """``auto`` with its three files (endpoints, generation and judge settings) and its
    question.jsonl: the models and the judge called over HTTP as they say, the files written
    with each question's category and names with / mapped as its readers read them."""
    (tmp_path / "api_config.yaml").write_text(API_CONFIG.format(base=server.base_url))
    (tmp_path / "gen.yaml").write_text(
        "bench_name: arena-hard-v2.0\nmodel_list:\n  - local-ace\n  - gemma-3-27b-it\n"
    )
    (tmp_path / "judge.yaml").write_text(SETTINGS_V2.replace("gpt-4.1", "judge"))
    qs = tmp_path / "question.jsonl"
    cats = ["hard_prompt", "creative_writing"]
    qs.write_text(
        "".join(
            json.dumps({"uid": p["id"], "category": cats[k % 2], "prompt": p["prompt"]}) + "\n"
            for k, p in enumerate(demo_prompts(6, seed=2))
        )
    )
    assert prompt_categories(qs) == {q.uid: q.category for q in read_questions(qs)}
    out = tmp_path / "out.json"
    cmd = [sys.executable, "-m", "stablearena", "auto", str(qs),
           "--arena-hard-endpoints", str(tmp_path / "api_config.yaml"),
           "--arena-hard-gen-config", str(tmp_path / "gen.yaml"),
           "--arena-hard-config", str(tmp_path / "judge.yaml"),
           "--design", "baseline", "--baseline", "gemma-3-27b-it", "--budget", "24",
           "--probe-share", "0", "--arena-hard-dir", str(tmp_path / "ah"), "-o", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180, env={
        **__import__("os").environ, "DEMO_KEY": "unused"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    p = json.loads(out.read_text())
    assert p["failed_judgements"] == {} and p["arena_hard"]["written"]["judgments"] == 6
    assert server.stats()["demo-ace"]["requests"] >= 6  # its model names, over HTTP
    run = read_run(tmp_path / "ah")
    assert [q.category for q in run.questions] == [cats[k % 2] for k in range(6)]
    assert {j.category for j in run.judgments["judge"]} == set(cats)
    labels = {lab for j in run.judgments["judge"] for lab in j.labels}
    assert labels <= set(LABELS) and labels & {"A>>B", "B>>A"}
    bad = subprocess.run(cmd[:5] + ["--arena-hard-gen-config", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--arena-hard-endpoints needs" in bad.stderr


def test_names_with_a_slash_are_written_as_its_readers_read_them(tmp_path):
    names = ["o3-mini-2025-01-31", "google/gemma-3-27b-it", "Qwen/QwQ-32B"]
    run = simulate_run([1000, 1100, 950], 12, names=names, judge="openai/gpt-4o", seed=3)
    write_run(run, tmp_path)
    # its glob("model_answer/*.jsonl") and show_result.py -j openai/gpt-4o read these
    assert sorted(p.name for p in (tmp_path / "model_answer").glob("*.jsonl")) == [
        "QwQ-32B.jsonl", "gemma-3-27b-it.jsonl", "o3-mini-2025-01-31.jsonl"]  # fmt: skip
    judged = tmp_path / "model_judgment" / "openai" / "gpt-4o"
    assert sorted(p.name for p in judged.glob("*.jsonl")) == [
        "QwQ-32B.jsonl",
        "gemma-3-27b-it.jsonl",
    ]
    first = json.loads((judged / "QwQ-32B.jsonl").read_text().splitlines()[0])
    assert first["model"] == "Qwen/QwQ-32B"  # the full name in the record
    back = read_run(tmp_path)
    assert set(back.answers) == set(names) and set(back.judgments) == {"openai/gpt-4o"}
    battles, _ = back.battles()
    assert set(battles.models) == set(names)
    two = simulate_run([1000, 1100, 950], 3, names=["base", "a/x", "b/x"], seed=1)
    with pytest.raises(InputError, match="would be one file; rename one"):
        write_run(two, tmp_path / "two")


def _answer(model: str, uid: str, text: str, v01: bool) -> dict:
    meta = {"token_len": len(text.split()), "header_count": {f"h{k}": 0 for k in range(1, 7)},
            "list_count": {"ordered": 0, "unordered": text.count("\n- ")},
            "bold_count": {"**": text.count("**") // 2, "__": 0}}  # fmt: skip
    if v01:
        return {"question_id": uid, "answer_id": f"{model}-{uid}", "model_id": model,
                "choices": [{"index": 0, "turns": [{"content": text, "token_len": len(text)}]}],
                "tstamp": 1.0, "conv_metadata": meta}  # fmt: skip
    return {"uid": uid, "ans_id": f"{model}-{uid}", "model": model, "messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": {"answer": text}}],
        "tstamp": 1.0, "metadata": meta}  # fmt: skip


@pytest.mark.parametrize(
    "questions", ["v2.0-question.jsonl", "v0.1-question.jsonl", "v0.1-2024-question.jsonl"]
)
def test_our_reader_on_its_files_for_every_category(tmp_path, questions):
    """Files in its layout around its own questions: every category read with its baseline
    (v2.0's creative_writing baseline judged against itself too, as when it is in the
    model_list); ``arena-hard DIR -c CATEGORY`` prints each category's board."""
    v01 = questions.startswith("v0.1-2024")
    d = tmp_path / "data"
    d.mkdir()
    (d / "question.jsonl").write_bytes((DATA / questions).read_bytes())
    qs = read_questions(d / "question.jsonl")
    cats = sorted({q.category for q in qs})
    assert cats == (
        ["creative_writing", "hard_prompt"] if questions.startswith("v2") else ["arena-hard-v0.1"]
    )
    models = ["model-long", "model-short"]
    bases = {c: CATEGORIES[c].baseline for c in cats}
    judge = "gpt-4.1"
    answers: dict[str, list[str]] = {}
    judgments: dict[str, list[str]] = {}
    for k, q in enumerate(qs):
        base = bases[q.category]
        for m in {base, *models, *bases.values()}:
            text = f"**{m}**\n- " + " ".join(["word"] * (40 if m == "model-long" else 10 + k))
            answers.setdefault(m, []).append(json.dumps(_answer(m, q.uid, text, v01)))
        judged = [*models, *([base] if q.category == "creative_writing" else [])]
        for m in judged:
            games = [{"score": ["B>>A", "A>B", "A=B"][(k + len(m)) % 3], "judgment": "…"},
                     {"score": ["A>>B", "B>A", "A=B"][(k * 2 + len(m)) % 3], "judgment": "…"}]  # fmt: skip
            rec = {"uid": q.uid, "category": q.category, "judge": judge, "model": m,
                   "baseline": base, "games": games}  # fmt: skip
            if v01:  # its 2024 files: question_id, no category or baseline
                rec = {"question_id": q.uid, "model": m, "judge": judge, "games": games}
            judgments.setdefault(m, []).append(json.dumps(rec, ensure_ascii=False))
    for m, lines in answers.items():
        (d / "model_answer").mkdir(exist_ok=True)
        (d / "model_answer" / f"{m}.jsonl").write_text("\n".join(lines) + "\n")
    for m, lines in judgments.items():
        (d / "model_judgment" / judge).mkdir(parents=True, exist_ok=True)
        (d / "model_judgment" / judge / f"{m}.jsonl").write_text("\n".join(lines) + "\n")
    run = read_run(d, baseline="gpt-4-0314" if v01 else None)
    for c in cats:
        battles, skipped = run.battles(category=None if v01 else c)
        assert skipped == 0 and bases[c] in battles.models
        assert set(battles.models) == {bases[c], *models}
        out = tmp_path / f"{c}.json"
        cmd = [sys.executable, "-m", "stablearena", "arena-hard", str(d), "--rounds", "10",
               "-o", str(out), *(["--baseline", bases[c]] if v01 else ["-c", c])]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        p = json.loads(out.read_text())
        assert p["baseline"] == bases[c]
        assert {r["model"] for r in p["boards"][0]["models"]} == {bases[c], *models}
        own = p.get("baseline_judged_against_itself")
        if c == "creative_writing":  # show_result.py's measured row of the baseline
            mine = self_judged_row(run.chosen(category=c), rounds=10)
            assert own == mine and own["model"] == bases[c] and own["judgments"] == 3
            assert f"{bases[c]} judged against itself" in done.stdout
        else:
            assert own is None


def test_convention_arena_hard_is_honoured(tmp_path):
    run = simulate_run([1000, 1100, 950], 80, lengths=[400, 1200, 300], length_bias=2.0, seed=5)
    write_run(run, tmp_path / "run")
    boards = {}
    for conv in ("ours", "arena-hard"):
        out = tmp_path / f"{conv}.json"
        cmd = [sys.executable, "-m", "stablearena", "arena-hard", str(tmp_path / "run"),
               "--rounds", "20", "--convention", conv, "-o", str(out)]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        boards[conv] = json.loads(out.read_text())["boards"]
        assert boards[conv][1]["name"] == f"style-controlled ({conv})"
    assert boards["ours"][0] == boards["arena-hard"][0]  # the plain board is one
    assert boards["ours"][1]["models"] != boards["arena-hard"][1]["models"]
