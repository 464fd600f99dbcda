"""The demo models hold a conversation: any prompt and follow-up answered in Markdown, of known
quality, over HTTP from the real demo server process (stablearena.judging.endpoints.demo_chat)."""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path
from statistics import mean

import httpx
import pytest
import tomllib
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stablearena.judging.anonymity import WELL_KNOWN_NAMES, names_mentioned
from stablearena.judging.endpoints import demo_chat
from stablearena.judging.endpoints.demo import DEMO_MODELS, is_correct, truth
from stablearena.judging.endpoints.demo import demo_chat as chat
from stablearena.judging.endpoints.demo_server import DemoServer, tokens
from stablearena.judging.injection import detect

ROOT = Path(__file__).resolve().parents[1]

#: (prompt, its kind, words of which the answer must name one, the Markdown it must hold,
#: a follow-up, words of which the follow-up's answer must name one, the Markdown it holds)
CASES = [
    (
        "Explain how to reverse a string in Python",
        "code",
        ("revers",),
        r"```python\n",
        "Can you do it in Rust?",
        ("revers",),
        r"```rust\n",
    ),
    (
        "Compare TCP and UDP",
        "compare",
        ("TCP",),
        r"\n\|---\|",
        "Why is that?",
        ("TCP",),
        r"(^|\n)- ",
    ),
    (
        "Write a haiku about autumn",
        "creative",
        ("autumn", "Autumn"),
        r"(^|\n)(###|\*[^*])",
        "Now write one about winter.",
        ("winter", "Winter"),
        r"(^|\n)(###|\*[^*])",
    ),
    (
        "What is 17 + 23?",
        "math",
        ("17",),
        r"\$[^$]+\$",
        "And what is 17 * 3?",
        ("17",),
        r"\$[^$]+\$",
    ),
    (
        "How do I make a cup of tea?",
        "howto",
        ("tea",),
        r"\n1\. .*\n2\. ",
        "What about coffee?",
        ("coffee",),
        r"\n1\. .*\n2\. ",
    ),
    (
        "Summarise the plot of Hamlet",
        "summary",
        ("Hamlet",),
        r"\*\*Hamlet\*\*.*\n- ",
        "And Macbeth?",
        ("Macbeth",),
        r"\*\*Macbeth\*\*.*\n- ",
    ),
    (
        "What is the capital of France?",
        "capital",
        ("France",),
        r"\*\*[A-Z][a-z]+\*\*",
        "And Germany?",
        ("Germany",),
        r"\*\*[A-Z][a-z]+\*\*",
    ),
    (
        "Give me advice on learning Rust",
        "advice",
        ("Rust",),
        r"(^|\n)- ",
        "Tell me more.",
        ("Rust",),
        r"(^|\n)- ",
    ),
    (
        "Translate 'good morning' into Spanish",
        "translate",
        ("morning",),
        r"\*\*[^*]+\*\*",
        "And in French?",
        ("morning",),
        r"\*\*[^*]+\*\*",
    ),
    (
        "What is a derivative in calculus?",
        "math",
        ("derivative", "Derivative"),
        r"\$\$\n.+\n\$\$",
        "Give me an example.",
        ("derivative",),
        r"\$[^$]+\$",
    ),
]
REFUSALS = re.compile(
    r"I only answer|I can(?:no|')t (?:help|answer)|I'm (?:not able|unable)|as an AI", re.I
)
NAMES = [*WELL_KNOWN_NAMES, *(m.name for m in DEMO_MODELS)]


@pytest.fixture(scope="module")
def server():
    with DemoServer(seed=0) as s:
        yield s


def stream(server, model: str, messages: list[dict[str, str]]) -> tuple[str, int]:
    """The streamed answer (joined deltas) and the number of content chunks it came in."""
    body = {"model": model, "messages": messages, "stream": True}
    parts: list[str] = []
    with httpx.stream("POST", server.base_url + "/chat/completions", json=body, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:])["choices"]:
                    if choice["delta"].get("content"):
                        parts.append(choice["delta"]["content"])
    return "".join(parts), len(parts)


def check(answer: str, words: tuple[str, ...], structure: str, where: str) -> None:
    assert answer.strip() and not REFUSALS.search(answer), where
    assert any(w in answer for w in words), (where, words, answer)
    assert re.search(structure, answer, re.S), (where, structure, answer)
    assert not detect(answer).flagged, (where, answer)  # never reads as a note to the judge
    assert names_mentioned(answer, NAMES) == [], where  # never names a model: votes stay blind


@pytest.fixture(scope="module")
def conversations(server):
    """Every demo model's two turns on each of the ten prompts, over HTTP."""
    out = {}
    for m in DEMO_MODELS:
        for prompt, _, _, _, follow, _, _ in CASES:
            msgs = [{"role": "user", "content": prompt}]
            first, chunks = stream(server, m.name, msgs)
            msgs += [{"role": "assistant", "content": first}, {"role": "user", "content": follow}]
            second, _ = stream(server, m.name, msgs)
            out[m.name, prompt] = (first, second, chunks)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c[1] + ":" + c[0][:24] for c in CASES])
def test_every_demo_model_answers_each_kind_and_its_follow_up(conversations, case):
    prompt, kind, words, structure, follow, follow_words, follow_structure = case
    assert demo_chat.read_prompt(prompt).kind == kind
    for m in DEMO_MODELS:
        first, second, chunks = conversations[m.name, prompt]
        assert chunks == len(tokens(first)) > 5  # streamed word by word
        check(first, words, structure, f"{m.name}: {prompt}")
        # the follow-up keeps the conversation's subject, in the same kind of Markdown
        check(second, follow_words, follow_structure, f"{m.name}: {prompt} / {follow}")


def test_the_strong_model_answers_checkable_turns_and_follow_ups_right(conversations):
    first, second, _ = conversations["demo-ace", "What is 17 + 23?"]
    assert first.rstrip().endswith("The answer is 40.") and is_correct("What is 17 + 23?", first)
    assert second.rstrip().endswith("The answer is 51.")
    assert truth("And what is 17 * 3?") == "51"
    first, second, _ = conversations["demo-ace", "What is the capital of France?"]
    assert "**Paris**" in first and "**Berlin**" in second
    first, second, _ = conversations["demo-ace", "Translate 'good morning' into Spanish"]
    assert "**Buenos días**" in first and "**Bonjour**" in second
    first, second, _ = conversations["demo-ace", "Explain how to reverse a string in Python"]
    assert "[::-1]" in first and "```rust\n" in second and ".rev()" in second


def test_the_better_model_answers_longer_and_more_completely(conversations):
    """The true order (DEMO_MODELS, best first) shows in the answers: the best model's are
    longer and have more blocks than the worst's, and the better half's more than the worse
    half's."""

    def size(name: str) -> tuple[float, float]:
        texts = [t for (n, _), (a, b, _) in conversations.items() if n == name for t in (a, b)]
        return mean(len(t) for t in texts), mean(len(t.split("\n\n")) for t in texts)

    sizes = [size(m.name) for m in DEMO_MODELS]
    print("mean characters, blocks per answer:", [f"{c:.0f}, {b:.1f}" for c, b in sizes])
    assert sizes[0][0] > 1.5 * sizes[-1][0] and sizes[0][1] > sizes[-1][1]
    assert mean(c for c, _ in sizes[:4]) > mean(c for c, _ in sizes[4:])


def test_answers_are_a_function_of_the_conversation_and_the_seed(server):
    msgs = [{"role": "user", "content": "Write a poem about the sea"}]
    again = stream(server, "demo-solid", msgs)[0]
    assert again == stream(server, "demo-solid", msgs)[0] == chat(DEMO_MODELS[2], msgs, 0)
    seeds = {chat(DEMO_MODELS[2], msgs, s) for s in range(6)}
    assert len(seeds) > 1  # the seed moves the draws
    longer = [*msgs, {"role": "assistant", "content": again}, {"role": "user", "content": "More"}]
    assert chat(DEMO_MODELS[2], longer, 0) != again


def test_a_brief_system_prompt_shortens_the_answers():
    ask = [{"role": "user", "content": "Explain recursion"}]
    brief = [{"role": "system", "content": "Answer briefly."}, *ask]
    long = [len(chat(m, ask, s)) for m in DEMO_MODELS[:3] for s in range(5)]
    short = [len(chat(m, brief, s)) for m in DEMO_MODELS[:3] for s in range(5)]
    assert mean(short) < mean(long)


def test_a_follow_up_in_words_spells_the_previous_result():
    msgs = [{"role": "user", "content": "What is 17*23?"}]
    msgs += [{"role": "assistant", "content": chat(DEMO_MODELS[0], msgs)}]
    msgs += [{"role": "user", "content": "Say it in words."}]
    assert "**three hundred ninety-one**" in chat(DEMO_MODELS[0], msgs)
    assert demo_chat.number_words(1_000_017) == "one million seventeen"


_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=120
) | st.sampled_from([c[0] for c in CASES] + [c[4] for c in CASES] + ["", "?", "and", "1 + "])


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_TEXT, min_size=1, max_size=4), st.sampled_from(DEMO_MODELS), st.integers(0, 9))
def test_any_conversation_gets_a_stable_non_empty_answer(turns, model, seed):
    msgs: list[dict[str, str]] = []
    for text in turns:
        msgs.append({"role": "user", "content": text})
        answer = chat(model, msgs, seed)
        assert answer.strip() and not answer[0].isspace() and answer == chat(model, msgs, seed)
        assert "".join(tokens(answer)) == answer  # streams back to the same text
        msgs.append({"role": "assistant", "content": answer})


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 999), st.sampled_from("+-*"), st.integers(0, 999), st.booleans())
def test_any_arithmetic_turn_is_checkable(x, op, y, follow):
    prompt = f"And what is {x} {op} {y}?" if follow else f"What is {x}{op}{y}?"
    right = str(x + y if op == "+" else x - y if op == "-" else x * y)
    assert truth(prompt) == right
    answer = chat(DEMO_MODELS[0], [{"role": "user", "content": prompt}])
    said = re.search(r"The answer is (-?\d+)\.\s*$", answer)
    assert said and "$" in answer  # right or (2% of the time) wrong, always stated


def test_the_paced_server_waits_between_words():
    """``--pace S``: S seconds before each streamed word (3 S after a paragraph); ``slow=0`` in
    the model name turns it off. Checked by the pauses the server took (its stats), not by the
    clock; the time it adds is measured by bench/bench_arena_start.py."""
    pace = 0.02
    with DemoServer(seed=0, pace=pace) as s:
        msgs = [{"role": "user", "content": "Compare TCP and UDP"}]
        text, chunks = stream(s, "demo-ace", msgs)
        paragraphs = sum(t.endswith("\n\n") for t in tokens(text)[:-1])
        assert chunks > 30 and paragraphs > 0
        got = s.stats()
        assert abs(got["demo-ace"]["paused"] - pace * (chunks + 2 * paragraphs)) < 1e-9
        stream(s, "demo-ace+slow=0", msgs)
        assert s.stats()["demo-ace+slow=0"]["paused"] == 0


def test_a_pace_out_of_range_is_refused_with_the_value():
    cmd = [sys.executable, "-m", "stablearena.judging.endpoints.demo_server", "--pace", "-1"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--pace -1.0" in r.stderr and "between 0 and 5" in r.stderr


def test_the_demo_text_is_package_data():
    """A wheel holds what pyproject's package-data lists: the bundled demo text must match."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["stablearena.judging.endpoints"]
    package = Path(demo_chat.__file__).parent
    files = [
        p.relative_to(package).as_posix() for p in (package / "data").rglob("*") if p.is_file()
    ]
    assert files == ["data/demo_chat.json"]
    assert all(any(fnmatch.fnmatch(f, pat) for pat in patterns) for f in files)
    assert "Written for stablearena" in demo_chat.chat_data()["_about"]
