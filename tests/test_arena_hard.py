"""Arena-Hard-Auto compatibility: its files round trip, its judgments as battles, its baseline
boards and benchmark metrics on a simulated benchmark of known truth, and ``auto``'s export."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stablearena.analysis.metrics import (
    agreement_with_ci,
    pair_rank_brier,
    separability,
    spearman,
)
from stablearena.data.battles import Outcome
from stablearena.errors import InputError
from stablearena.judging.arena_hard import (
    ARENA_HARD_PROMPT,
    AnswerRecord,
    ArenaHardRun,
    Judgment,
    Question,
    answer_metadata,
    apply_judge_settings,
    baseline_board,
    board_metrics,
    export_journal,
    extract_label,
    judgment_battles,
    read_answers,
    read_board,
    read_judge_settings,
    read_judgments,
    read_questions,
    read_run,
    simulate_run,
    write_answers,
    write_judge_settings,
    write_judgments,
    write_questions,
    write_run,
)
from stablearena.judging.auto_arena import AutoArena, AutoConfig, Prompt, read_prompts
from stablearena.judging.endpoints.demo import DEMO_MODELS, LocalDemoClient, demo_prompts
from stablearena.judging.judges import JudgeClient, demo_judges
from stablearena.raters.base import ELO_SCALE

# Lines in the shapes Arena-Hard-Auto's files have: v2 (pandas-written, compact, "\/"
# escaped), v0.1 (question_id/turns, choices/turns) and json.dumps-written judgments.
Q_V2 = (
    '{"uid":"2edbb5f36f5b42be","category":"hard_prompt","subcategory":"coding",'
    '"prompt":"Write a zig program; read input.txt \\/ print to stdout. caf\\u00e9"}\n'
    '{"uid":"0253f09025cc40cd","category":"hard_prompt","subcategory":"aws","prompt":"Which VPC?"}\n'
)
Q_V01 = (
    '{"question_id":"328c149ed45a41c0b9d6f14659e63599","category":"arena-hard-v0.1",'
    '"cluster":"ABC Sequence Puzzles & Groups","turns":[{"content":"Use ABC notation."}]}\n'
)
A_V2 = (
    '{"uid":"2edbb5f36f5b42be","ans_id":"dgYCTvj3bz42JVPxnkZNB2","model":"o3-mini",'
    '"messages":[{"role":"user","content":"Write a zig program"},{"role":"assistant",'
    '"content":{"answer":"# Plan\\n\\n1. read\\n- **bold** zig ```code```"}}],"tstamp":1744155079.1383834,'
    '"metadata":{"token_len":179,"header_count":{"h1":1,"h2":0,"h3":0,"h4":0,"h5":0,"h6":0},'
    '"list_count":{"ordered":1,"unordered":1},"bold_count":{"**":1,"__":0}}}\n'
)
A_V01 = (
    '{"question_id":"0122ab60646b4961bc39e9c03bdf6bcc","answer_id":"ndKLaFQXbU4eujaZBGjGZJ",'
    '"model_id":"gpt-4-0314","choices":[{"index":0,"turns":[{"content":"To implement a SCIM '
    'server","token_len":512}]}],"tstamp":1711397284.101236}\n'
)
J_V2 = (
    json.dumps(
        {
            "uid": "2edbb5f36f5b42be",
            "category": "hard_prompt",
            "judge": "gpt-4.1",
            "model": "qwq-32b",
            "baseline": "o3-mini",
            "games": [
                {"score": "B>>A", "judgment": {"answer": "… [[B>>A]]"}, "prompt": []},
                {"score": "A=B", "judgment": {"answer": "… [[A=B]] é"}, "prompt": []},
            ],
        },
        ensure_ascii=False,
    )
    + "\n"
    + json.dumps(
        {
            "uid": "0253f09025cc40cd",
            "category": "hard_prompt",
            "judge": "gpt-4.1",
            "model": "qwq-32b",
            "baseline": "o3-mini",
            "games": [None, {"score": "A>B", "judgment": {"answer": "[[A>B]]"}}],
        }
    )
    + "\n"
)
J_V01 = (
    '{"question_id":"328c149ed45a41c0b9d6f14659e63599","model":"gpt-3.5-turbo-0125",'
    '"judge":"gpt-4-1106-preview","games":[{"user_prompt":"…","judgment":"[[A>>B]]","score":"A>>B"},'
    '{"user_prompt":"…","judgment":"[[B<A]]","score":"B<A"}]}\n'
)
SETTINGS_V2 = """judge_model: gpt-4.1
temperature: 0.0
max_tokens: 16000

bench_name: arena-hard-v2.0

reference: null

regex_patterns:
  - \\[\\[([AB<>=]+)\\]\\]
  - \\[([AB<>=]+)\\]

prompt_template: "<|User Prompt|>\\n{QUESTION}\\n\\n<|The Start of Assistant A's Answer|>\\n{ANSWER_A}\\n<|The End of Assistant A's Answer|>\\n\\n<|The Start of Assistant B's Answer|>\\n{ANSWER_B}\\n<|The End of Assistant B's Answer|>"

model_list:
  - deepseek-r1
"""
SETTINGS_V01 = """name: judgment config file for Arena Hard
bench_name: arena-hard-v0.1
judge_model: gpt-4-1106-preview
reference: False
baseline: True
baseline_model: gpt-4-0314
temperature: 0
max_tokens: 4096
regex_pattern: \\[\\[([AB<>=]+)\\]\\]
system_prompt: "Please act as an impartial judge. Verdict: [[A>>B]] ... [[B>>A]]."
prompt_template: ["<|User Prompt|>\\n{question_1}\\n\\n<|The Start of Assistant A's Answer|>\\n{answer_1}\\n<|The End of Assistant A's Answer|>\\n\\n<|The Start of Assistant B's Answer|>\\n{answer_2}\\n<|The End of Assistant B's Answer|>"]
model_list:
  - gpt-3.5-turbo-0125
"""


def _round_trip(tmp_path, text: str, read, write, **kw):
    src = tmp_path / "in.jsonl"
    src.write_text(text, encoding="utf-8")
    first = read(src, **kw)
    out = tmp_path / "out.jsonl"
    write(first, out)
    assert out.read_bytes() == src.read_bytes()  # the file's lines back, byte for byte
    second = read(out, **kw)
    assert first == second and [a.record for a in first] == [b.record for b in second]
    return first


@pytest.mark.parametrize("text", [Q_V2, Q_V01], ids=["v2", "v0.1"])
def test_questions_round_trip(tmp_path, text):
    qs = _round_trip(tmp_path, text, read_questions, write_questions)
    assert all(q.uid and q.prompt for q in qs)
    assert qs[0].prompt.endswith("café") or qs[0].prompt == "Use ABC notation."
    # auto reads the same file as its prompts
    assert [p.id for p in read_prompts(tmp_path / "in.jsonl")] == [q.uid for q in qs]


def test_answers_round_trip(tmp_path):
    (v2,) = _round_trip(tmp_path, A_V2, read_answers, write_answers)
    assert (
        v2.model == "o3-mini" and v2.text.startswith("# Plan") and v2.metadata["token_len"] == 179
    )
    (v01,) = _round_trip(tmp_path, A_V01, read_answers, write_answers)
    assert v01.model == "gpt-4-0314" and v01.text == "To implement a SCIM server"
    assert v01.metadata is None


def test_judgments_round_trip(tmp_path):
    js = _round_trip(tmp_path, J_V2, read_judgments, write_judgments)
    assert js[0].labels == ("B>>A", "A=B") and js[1].labels == (None, "A>B")
    assert js[0].judge == "gpt-4.1" and js[0].baseline == "o3-mini"
    (old,) = _round_trip(tmp_path, J_V01, read_judgments, write_judgments, baseline="gpt-4-0314")
    assert old.labels == ("A>>B", "B<A") and old.baseline == "gpt-4-0314"


@pytest.mark.parametrize("text", [SETTINGS_V2, SETTINGS_V01], ids=["v2", "v0.1"])
def test_judge_settings_round_trip(tmp_path, text):
    src = tmp_path / "judge.yaml"
    src.write_text(text)
    s = read_judge_settings(src)
    write_judge_settings(s, tmp_path / "again.yaml")
    again = read_judge_settings(tmp_path / "again.yaml")
    assert s == again and dict(s.record) == dict(again.record)
    write_judge_settings(again, tmp_path / "third.yaml")
    assert (tmp_path / "third.yaml").read_bytes() == (tmp_path / "again.yaml").read_bytes()
    assert "{QUESTION}" in s.template and s.patterns[0] == r"\[\[([AB<>=]+)\]\]"
    # our judge reproduces the settings
    judge = apply_judge_settings(demo_judges("http://127.0.0.1:1/v1")[0], s)
    msg = judge.message("Q?", "first answer", "second answer")
    assert msg.startswith("<|User Prompt|>\nQ?\n") and "A's Answer|>\nfirst answer" in msg
    assert judge.parser.parse("reasoning … My final verdict: [[B>>A]]") == "B"
    assert judge.parser.parse("[[A<B]]") == "B" and judge.parser.parse("[[A=B]]") == "tie"
    # a label show_result.py does not score is a failed judgement (ours included)
    assert judge.parser.parse("[[C]]") is None and judge.parser.parse("[[A]]") is None
    assert judge.endpoint.params["max_tokens"] == s.max_tokens
    if s.system_prompt:
        assert judge.endpoint.system_prompt == s.system_prompt
    else:  # v2 keeps it in its code: its hard_prompt instruction, asking for the five labels
        assert judge.endpoint.system_prompt == ARENA_HARD_PROMPT
    if s.rule == "v2":  # every pattern, in order, on the reply upper-cased
        assert judge.parser.parse("so [[a>b]]") == "A" and judge.parser.parse("[B>A]") == "B"
        assert judge.parser.parse("[[A>B]] then [B>A]") == "A"  # the first pattern decides
        assert judge.parser.parse("[[b>>a]] no, [[A>B]]") == "A"  # its last match
    else:  # v0.1: its one pattern, case as written, one label
        assert judge.parser.parse("so [[a>b]]") is None and judge.parser.parse("[B>A]") is None
        assert judge.parser.parse("[[A>B]] then [[B>A]]") is None
        assert judge.parser.parse("[[A>B]] so [[A>B]]") == "A"


def test_errors_name_file_and_line(tmp_path):
    bad = tmp_path / "j.jsonl"
    bad.write_text(J_V2.replace('"A=B"', '"A=C"', 1))
    with pytest.raises(
        InputError, match=r"j\.jsonl, line 1, field games\[1\]\.score: verdict label 'A=C'"
    ):
        read_judgments(bad)
    bad.write_text(Q_V2 + "{not json\n")
    with pytest.raises(InputError, match=r"line 3: not a JSON question record"):
        read_questions(bad)
    bad.write_text('{"uid": "x", "model": "m"}\n')
    with pytest.raises(InputError, match=r"line 1: the answer has neither messages"):
        read_answers(bad)
    bad.write_text(J_V01)
    with pytest.raises(InputError, match=r"line 1: the judgment names no baseline"):
        read_judgments(bad)
    (tmp_path / "s.yaml").write_text("judge_model: x\nprompt_template: 'no answers'\n")
    with pytest.raises(InputError, match=r"s\.yaml: prompt_template needs"):
        read_judge_settings(tmp_path / "s.yaml")


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(_text, _text), min_size=1, max_size=5, unique_by=lambda t: t[0]),
    st.lists(
        st.sampled_from([None, "A>>B", "A>B", "A=B", "B>A", "B>>A", "A<<B"]), min_size=2, max_size=2
    ),
)
def test_new_records_round_trip(tmp_path_factory, items, labels):
    """Records built anew (any text) written, read and written again: equal data, same bytes."""
    d = tmp_path_factory.mktemp("ah")
    qs = [
        Question(u, p, "c", {"uid": u, "category": "c", "prompt": p}) for u, p in items if p.strip()
    ]
    if not qs:
        return
    answers = [
        AnswerRecord(
            q.uid,
            "m",
            q.prompt,
            None,
            {
                "uid": q.uid,
                "model": "m",
                "messages": [{"role": "assistant", "content": {"answer": q.prompt}}],
            },
        )
        for q in qs
    ]
    games = [
        None if lab is None else {"score": lab, "judgment": {"answer": q}}
        for lab, q in zip(labels, "xy", strict=True)
    ]
    js = [
        Judgment(
            q.uid,
            "m",
            "b",
            "j",
            "c",
            tuple(labels),
            {
                "uid": q.uid,
                "category": "c",
                "judge": "j",
                "model": "m",
                "baseline": "b",
                "games": games,
            },
        )
        for q in qs
    ]
    for items_, read, write, name in (
        (qs, read_questions, write_questions, "q.jsonl"),
        (answers, read_answers, write_answers, "a.jsonl"),
        (js, read_judgments, write_judgments, "j.jsonl"),
    ):
        write(items_, d / name)
        back = read(d / name)
        assert back == items_ and [b.record for b in back] == [a.record for a in items_]
        write(back, d / ("2" + name))
        assert (d / ("2" + name)).read_bytes() == (d / name).read_bytes()


def test_battles_follow_arena_hard_scoring(tmp_path):
    """Two battles a judgment, A the answer shown first; the model's mean score equals
    Arena-Hard-Auto's rule (game 2's label for A, 1 − game 1's; ``>>`` three times)."""
    (tmp_path / "j.jsonl").write_text(
        J_V2 + J_V01.replace('"model":"gpt', '"baseline":"o3-mini","model":"gpt')
    )
    js = read_judgments(tmp_path / "j.jsonl")
    battles, skipped = judgment_battles(js)
    assert skipped == 1  # the judgment with a game without verdict, counted
    assert len(battles) == 4 and set(battles.annotators) == {"gpt-4.1", "gpt-4-1106-preview"}
    names = [
        (battles.models[a], battles.models[b])
        for a, b in zip(battles.model_a, battles.model_b, strict=True)
    ]
    assert names[0] == ("o3-mini", "qwq-32b") and names[1] == ("qwq-32b", "o3-mini")
    assert list(battles.outcome[:2]) == [Outcome.B, Outcome.TIE] and list(
        battles.weights()[:2]
    ) == [3, 1]
    # Arena-Hard-Auto's expansion: qwq-32b gets [0.5] + [1 - 0] * 3 → mean 0.875
    board = baseline_board(battles, "o3-mini", rounds=200, seed=1)
    k = board.models.index("qwq-32b")
    assert board.samples[:, k].min() >= 0.5 and abs(board.score[k] - 0.875) < 0.05
    # gpt-3.5: game 1 A>>B (baseline strongly better: 0,0,0), game 2 B<A (A = the model wins: 1)
    assert abs(board.score[board.models.index("gpt-3.5-turbo-0125")] - 0.25) < 0.06


def test_answer_metadata_matches_arena_hard_counts():
    text = "# H1\n## H2\n\n1. one\n2. two\n- dot\n**b** and __u__\n```\n# not a header\n- no\n```"
    m = answer_metadata(text)
    assert m["header_count"]["h1"] == 1 and m["header_count"]["h2"] == 1
    assert m["list_count"] == {"ordered": 2, "unordered": 1}
    assert m["bold_count"] == {"**": 1, "__": 1}
    # the length first (show_result.py reads it by place), named for what it counts: not
    # tiktoken's tokens (no package here ships its gpt-4o encoding) but words and marks
    assert list(m)[0] == "word_and_mark_count" and "token_len" not in m
    assert answer_metadata("Hello, world! **x**")["word_and_mark_count"] == 9
    assert extract_label("I think [[a>b]]. On reflection: [[B>>A]]") == "B>>A"
    assert extract_label("maybe [B>A]") == "B>A" and extract_label("no verdict") is None


def test_metrics_by_hand():
    lo, hi = np.array([0.0, 2.0, 2.5]), np.array([1.0, 3.0, 3.5])
    assert separability(lo, hi) == pytest.approx(2 / 3)
    # reference separates all three pairs in the order 2 > 1 > 0
    rlo, rhi = np.array([0.0, 1.0, 2.0]), np.array([0.0, 1.0, 2.0])
    assert agreement_with_ci(lo, hi, rlo, rhi) == pytest.approx(2 / 3)  # (1 + 1 + 0) / 3
    assert agreement_with_ci(-hi, -lo, rlo, rhi) == pytest.approx(-2 / 3)
    samples = np.array([[0.5, 2.5, 3.0], [0.5, 2.5, 2.0]])  # 2 above 1 in half the rounds
    assert pair_rank_brier(samples, rlo, rhi) == pytest.approx((0 + 0 + 0.25) / 3)
    assert spearman([1, 2, 3], [10, 20, 30]) == 1.0 and spearman([1, 2, 3], [3, 2, 1]) == -1.0
    with pytest.raises(InputError, match="separates no pair"):
        agreement_with_ci(lo, hi, np.zeros(3), np.ones(3))


def test_simulated_benchmark_of_known_truth(tmp_path):
    """A judge that likes long answers: the plain board is misled by length, the
    style-controlled one recovers the known order; the metrics say so (known truth as a
    reference board with zero-width intervals)."""
    r = [1000, 1100, 1050, 950, 1200, 1000, 900, 1150]
    lengths = [500, 500, 1500, 500, 300, 900, 500, 500]
    t0 = time.perf_counter()
    write_run(simulate_run(r, 300, lengths=lengths, length_bias=2.0, seed=1), tmp_path)
    run = read_run(tmp_path)
    battles, skipped = run.battles()
    assert skipped == 0 and len(battles) == 2 * 7 * 300
    truth = {
        f"model_{k}": (1 / (1 + np.exp(-ELO_SCALE * (x - r[0]))),) * 3 for k, x in enumerate(r)
    }
    plain = board_metrics(baseline_board(battles, "model_0", seed=0), truth)
    styled_board = baseline_board(battles, "model_0", style=True, seed=0)
    styled = board_metrics(styled_board, truth)
    print("plain", plain, "\nstyle", styled, f"\n{time.perf_counter() - t0:.2f} s")
    assert styled_board.features == ("length", "headers", "lists", "bold")
    assert styled["spearman"] > 0.97 and plain["spearman"] < 0.9
    assert styled["agreement_with_ci"] > plain["agreement_with_ci"] + 0.2
    assert styled["brier"] < 0.02 < plain["brier"]
    assert 0.7 < styled["separability"] <= 1
    # the style-controlled scores sit near the true win rates against the baseline
    for m, s in zip(styled_board.models, styled_board.score, strict=True):
        assert abs(s - truth[m][0]) < 0.05, m


def test_arena_hard_convention():
    """Arena-Hard-Auto's style convention reads each model at the games' mean style
    difference: every model here writes longer than the baseline or as long, and a judge
    that likes length lifts them all; ours reads them at equal style, nearer the truth."""
    r = [1000, 1100, 950, 1000]
    run = simulate_run(r, 150, lengths=[400, 800, 800, 400], length_bias=2.0, seed=4)
    battles, _ = run.battles()
    ours = baseline_board(battles, "model_0", style=True, rounds=30, seed=0)
    theirs = baseline_board(
        battles, "model_0", style=True, convention="arena-hard", rounds=30, seed=0
    )
    truth = 1 / (1 + np.exp(-ELO_SCALE * (np.array(r) - r[0])))
    for m in ("model_1", "model_2"):
        k = ours.models.index(m)
        assert theirs.score[k] > ours.score[k] + 0.01
        assert abs(ours.score[k] - truth[int(m[-1])]) < abs(theirs.score[k] - truth[int(m[-1])])
    with pytest.raises(InputError, match="convention"):
        baseline_board(battles, "model_0", style=True, convention="lmarena")


def test_read_board(tmp_path):
    p = tmp_path / "ref.csv"
    p.write_text("model,score,rating_q025,rating_q975,CI\na,82.6,80.7,84.6,x\nb,79.3,77.2,80.6,y\n")
    assert read_board(p) == {"a": (82.6, 80.7, 84.6), "b": (79.3, 77.2, 80.6)}
    p.write_text("model,score\na,1\n")
    with pytest.raises(InputError, match="missing"):
        read_board(p)


def test_auto_run_exports_arena_hard_files(tmp_path):
    """An automatic baseline-design run written in Arena-Hard-Auto's layout and read back:
    every judgement against the baseline is one judgment whose games give the same battles."""
    prompts = [Prompt(p["id"], p["prompt"]) for p in demo_prompts(20, seed=3)]
    models = [LocalDemoClient(m.name) for m in DEMO_MODELS[:4]]
    judges = [
        JudgeClient(j, client=LocalDemoClient(j.name, system_prompt=j.endpoint.system_prompt))
        for j in demo_judges("http://127.0.0.1:1/v1")[:2]
    ]
    base = DEMO_MODELS[1].name
    arena = AutoArena(
        models, judges, prompts, AutoConfig(budget=80, design="baseline", baseline=base)
    )
    result = arena.run()
    counts = export_journal(arena.journal.records(), prompts, tmp_path, baseline=base)
    assert counts["not_baseline"] == 0 and counts["judgments"] == len(result.judgements)
    run = read_run(tmp_path)
    assert [q.uid for q in run.questions] == [p.id for p in prompts]
    battles, skipped = run.battles()
    ours = result.battles()
    assert skipped == 0 and len(battles) == 2 * len(ours)
    # each judgement's verdict in both orders becomes the two games: same votes for each model
    for m in ours.models:
        if m == base:
            continue
        k = ours.models.index(m)
        mine = (ours.model_a == k) & (ours.outcome == Outcome.A) | (ours.model_b == k) & (
            ours.outcome == Outcome.B
        )
        kk = battles.models.index(m)
        wins = (battles.model_a == kk) & (battles.outcome == Outcome.A) | (
            battles.model_b == kk
        ) & (battles.outcome == Outcome.B)
        assert wins.sum() >= 2 * mine.sum()  # a battle won in both orders is two games won
    again = tmp_path / "again"
    write_run(run, again)
    for f in tmp_path.rglob("*.jsonl"):
        if again not in f.parents:
            assert (again / f.relative_to(tmp_path)).read_bytes() == f.read_bytes()


def test_cli_arena_hard(tmp_path):
    write_run(
        simulate_run([1000, 1100, 950], 60, lengths=[400, 800, 400], seed=2), tmp_path / "run"
    )
    (tmp_path / "ref.csv").write_text(
        "model,score,lower,upper\nmodel_0,50,50,50\nmodel_1,64,63,65\nmodel_2,43,42,44\n"
    )
    out = tmp_path / "out.json"
    cmd = [sys.executable, "-m", "stablearena", "arena-hard", str(tmp_path / "run"),
           "--reference", str(tmp_path / "ref.csv"), "--rounds", "20", "-o", str(out)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    p = json.loads(out.read_text())
    assert [b["name"] for b in p["boards"]] == ["plain", "style-controlled (ours)"]
    assert p["baseline"] == "model_0" and p["ours"]["method"] == "am-elo"
    assert {"separability", "agreement_with_ci", "brier", "spearman"} <= set(
        p["boards"][0]["metrics"]
    )
    with pytest.raises(InputError, match="no question.jsonl"):
        read_run(tmp_path)
    (tmp_path / "run" / "model_answer" / "model_2.jsonl").unlink()  # no style for model_2
    with pytest.raises(InputError, match="no answer of 'model_2'"):
        read_run(tmp_path / "run").battles()
    plain = subprocess.run(
        [*cmd, "--no-style", "-j", "sim-judge", "-c", "sim"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plain.returncode == 0, plain.stderr
    assert [b["name"] for b in json.loads(out.read_text())["boards"]] == ["plain"]


def test_cli_auto_arena_hard_dir_and_reference(tmp_path):
    """``auto --design baseline --arena-hard-dir`` writes files ``arena-hard`` reads; the
    benchmark metrics of our board against a reference board of the demo's known order."""
    order = ["demo-ace", "demo-sharp", "demo-solid", "demo-fair", "demo-middling", "demo-shaky",
             "demo-sloppy", "demo-wild"]  # fmt: skip
    ref = tmp_path / "ref.csv"
    ref.write_text(
        "model,score,lower,upper\n"
        + "".join(f"{m},{8 - k},{8 - k},{8 - k}\n" for k, m in enumerate(order))
    )
    out = tmp_path / "board.json"
    settings = tmp_path / "arena-hard-v2.0.yaml"
    settings.write_text(SETTINGS_V2)  # the judges use its template and labels
    cmd = [
        sys.executable,
        "-m",
        "stablearena",
        "auto",
        "--demo",
        "--budget",
        "100",
        "--design",
        "baseline",
        "--baseline",
        "demo-fair",
        "--arena-hard-dir",
        str(tmp_path / "ah"),
        "--reference",
        str(ref),
        "-o",
        str(out),
        "--arena-hard-config",
        str(settings),
        "--probe-share",
        "0",
    ]  # fmt: skip  (the files' counts, without probe calls)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    p = json.loads(out.read_text())
    met = p["benchmark_metrics"]
    assert met["models_compared"] == 8 and -1 <= met["agreement_with_ci"] <= 1
    assert 0 <= met["brier"] <= 1 and 0 <= met["separability"] <= 1
    assert p["arena_hard"]["written"]["judgments"] == 50 and p["failed_judgements"] == {}
    assert p["arena_hard"]["boards"][0]["metrics"]["models_compared"] == 8
    run = read_run(tmp_path / "ah")
    assert sum(len(v) for v in run.judgments.values()) == 50
    bad = subprocess.run(
        [*cmd[:9], "--arena-hard-dir", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "--arena-hard-dir needs --baseline" in bad.stderr


def test_categories_with_their_own_baselines():
    """A v2 run: each category its baseline; a category's judgments make one board."""
    a = simulate_run([1000, 1100], 20, names=["o3-mini", "m"], category="hard_prompt", seed=1)
    b = simulate_run([1000, 900], 20, names=["gemini", "m"], category="creative_writing", seed=2)
    run = ArenaHardRun(
        a.questions, {**a.answers}, {"j": a.judgments["sim-judge"] + b.judgments["sim-judge"]}
    )
    with pytest.raises(InputError, match="does not involve the baseline"):
        baseline_board(judgment_battles(run.judgments["j"])[0], "o3-mini", rounds=5)
    battles, _ = run.battles(category="hard_prompt", style=False)
    assert set(battles.models) == {"o3-mini", "m"}
    with pytest.raises(InputError, match=r"category 'math'.*'creative_writing', 'hard_prompt'"):
        run.battles(category="math")
    with pytest.raises(InputError, match=r"no judgments of \['nobody'\]"):
        run.battles(judges=["nobody"])
