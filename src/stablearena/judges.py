"""LLM judges: an endpoint, a pairwise judging prompt and a verdict parser.

The protocol is MT-Bench's and Arena-Hard-Auto's pairwise one: a system prompt asking which of
two answers better follows the user's request, then the prompt, answer A and answer B; the
verdict is read from a marker (``[[A]]``, ``[[B]]``, ``[[C]]`` for a tie; Arena-Hard's
``[[A>>B]]`` … ``[[B>>A]]`` are read too) or a configurable pattern. Each battle is judged in
both orders (x as A, then y as A): agreeing verdicts stand, disagreeing ones count as a tie, so
a judge's position bias cancels. A verdict that cannot be parsed, or a judge call that fails,
makes the judgement a failure — never a vote. Each judge is an annotator (its name is the
annotator id), so am-ELO estimates its ability (docs/methods/annotators.md).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .endpoints.client import Answer, EndpointClient, Failure
from .endpoints.config import ModelEndpoint, endpoint_from_mapping, load_toml
from .errors import InputError
from .names import checked_name

__all__ = [
    "DEFAULT_JUDGE_SYSTEM_PROMPT",
    "DEFAULT_JUDGE_TEMPLATE",
    "VerdictParser",
    "Judge",
    "Verdict",
    "Judgement",
    "JudgeClient",
    "judges_from_toml",
    "read_judges",
    "combine_orders",
    "demo_judges",
]

DEFAULT_JUDGE_SYSTEM_PROMPT = (
    "You are an impartial judge. You will see a user's prompt and the answers of two AI "
    "assistants, A and B. Decide which answer better follows the user's request: judge "
    "correctness first, then helpfulness, relevance and clarity. Do not let the order of the "
    "answers, their length or the assistants' names sway you. Explain your reasoning briefly, "
    'then end with your final verdict, exactly one of: "[[A]]" if assistant A is better, '
    '"[[B]]" if assistant B is better, "[[C]]" for a tie.'
)

DEFAULT_JUDGE_TEMPLATE = (
    "<|User Prompt|>\n{prompt}\n\n"
    "<|The Start of Assistant A's Answer|>\n{answer_a}\n<|The End of Assistant A's Answer|>\n\n"
    "<|The Start of Assistant B's Answer|>\n{answer_b}\n<|The End of Assistant B's Answer|>"
)

_FIELDS = re.compile(r"\{(prompt|answer_a|answer_b)\}")

_DEFAULT_LABELS = {
    "A": "A",
    "B": "B",
    "C": "tie",
    "A>>B": "A",
    "A>B": "A",
    "A=B": "tie",
    "B>A": "B",
    "B>>A": "B",
}


@dataclass(frozen=True)
class VerdictParser:
    """Reads a verdict from a judge's reply.

    ``pattern``: a regular expression whose first group is a label; ``labels`` maps a label to
    ``"A"``, ``"B"`` or ``"tie"``. Every match is read; the verdict is the one they agree on.
    No match, or matches that disagree, is unparseable (``None``). A parser whose labels swap A
    and B makes an inverted judge.
    """

    pattern: str = r"\[\[(A>>B|A>B|A=B|B>A|B>>A|A|B|C)\]\]"
    labels: Mapping[str, str] = field(default_factory=lambda: dict(_DEFAULT_LABELS))

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))
        try:
            compiled = re.compile(self.pattern)
        except re.error as exc:
            raise InputError(f"verdict_pattern {self.pattern!r} is not a regex: {exc}") from exc
        if compiled.groups < 1:
            raise InputError(f"verdict_pattern {self.pattern!r} needs a (group) for the label")
        bad = {v for v in self.labels.values()} - {"A", "B", "tie"}
        if bad:
            raise InputError(f"verdict labels must map to A, B or tie, not {sorted(bad)}")

    def parse(self, text: str) -> str | None:
        """``"A"``, ``"B"``, ``"tie"``, or ``None`` when the reply has no (unambiguous)
        verdict."""
        found = {self.labels.get(m.group(1)) for m in re.finditer(self.pattern, text)}
        return found.pop() if len(found) == 1 and None not in found else None


@dataclass(frozen=True)
class Judge:
    """A judge: its endpoint (whose ``system_prompt`` is the judging instruction), the user
    message template (``{prompt}``, ``{answer_a}``, ``{answer_b}``) and the verdict parser."""

    name: str
    endpoint: ModelEndpoint
    template: str = DEFAULT_JUDGE_TEMPLATE
    parser: VerdictParser = field(default_factory=VerdictParser)

    def message(self, prompt: str, answer_a: str, answer_b: str) -> str:
        """The user message for one order (filled in one pass: an answer that contains
        ``{answer_b}`` stays as it is)."""
        values = {"prompt": prompt, "answer_a": answer_a, "answer_b": answer_b}
        return _FIELDS.sub(lambda m: values[m.group(1)], self.template)

    def to_record(self) -> dict[str, Any]:
        """The configuration as plain data (holds no key)."""
        return {
            "name": self.name,
            "endpoint": self.endpoint.to_record(),
            "template": self.template,
            "verdict_pattern": self.parser.pattern,
            "verdict_labels": dict(self.parser.labels),
        }


@dataclass(frozen=True)
class Verdict:
    """One judge call: ``order`` ``"xy"`` (x shown as A) or ``"yx"``; ``winner`` in A/B terms
    (``"A"``, ``"B"``, ``"tie"``); ``reasoning`` the judge's whole reply."""

    order: str
    winner: str
    reasoning: str
    call: Answer

    def for_x(self) -> str:
        """The verdict in the battle's terms: ``"x"``, ``"y"`` or ``"tie"``."""
        if self.winner == "tie":
            return "tie"
        first = "x" if self.order == "xy" else "y"
        return first if self.winner == "A" else ("y" if first == "x" else "x")


@dataclass(frozen=True)
class Judgement:
    """A battle (x, y on one prompt) judged in both orders by one judge.

    ``outcome``: ``"x"``, ``"y"`` or ``"tie"`` (disagreeing orders count as a tie), or ``None``
    with ``failure`` set when a call failed or a verdict was unparseable (never a vote).
    """

    judge: str
    x: str
    y: str
    prompt_id: str
    outcome: str | None
    verdicts: tuple[Verdict, ...] = ()
    failure: Failure | None = None

    @property
    def consistent(self) -> bool | None:
        """Whether both orders agreed (``None`` for a failure)."""
        if self.outcome is None:
            return None
        a, b = (v.for_x() for v in self.verdicts)
        return a == b

    def verdict_records(self) -> list[dict[str, str]]:
        """The judge's replies, one per order: ``{"order", "winner", "reasoning"}`` (what the
        journal and the store keep)."""
        return [
            {"order": v.order, "winner": v.winner, "reasoning": v.reasoning} for v in self.verdicts
        ]

    @property
    def calls(self) -> list[Answer]:
        """The judge calls that were answered."""
        return [v.call for v in self.verdicts]


def combine_orders(first: str, second: str) -> str:
    """Two verdicts in battle terms (``"x"``/``"y"``/``"tie"``): equal ones stand, different
    ones are a tie."""
    return first if first == second else "tie"


class JudgeClient:
    """Calls a judge: :meth:`judge_pair` judges one battle in both orders (the two calls run at
    once). ``client``: another transport with the same ``messages``/``complete`` calls (e.g.
    :class:`~stablearena.endpoints.demo.LocalDemoClient`); by default an
    :class:`EndpointClient` of the judge's endpoint (``options`` go to it)."""

    def __init__(self, judge: Judge, client: Any = None, **options: Any):
        self.judge = judge
        self.client = client if client is not None else EndpointClient(judge.endpoint, **options)

    @property
    def name(self) -> str:
        """The judge's annotator id."""
        return self.judge.name

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()

    async def verdict(
        self, prompt: str, answer_a: str, answer_b: str, order: str
    ) -> Verdict | Failure:
        """One judge call for one order."""
        msg = self.client.messages(self.judge.message(prompt, answer_a, answer_b))
        got = await self.client.complete(msg)
        if isinstance(got, Failure):
            return got
        winner = self.judge.parser.parse(got.text)
        if winner is None:
            tail = got.text[-200:]
            return Failure(
                self.name,
                "unparseable",
                f"no verdict in the reply: …{tail!r}",
                got.attempts,
                got.total_time,
            )
        return Verdict(order, winner, got.text, got)

    async def judge_pair(
        self, prompt: str, prompt_id: str, x: str, answer_x: str, y: str, answer_y: str
    ) -> Judgement:
        """Judge x against y on ``prompt`` in both orders."""
        v1, v2 = await asyncio.gather(
            self.verdict(prompt, answer_x, answer_y, "xy"),
            self.verdict(prompt, answer_y, answer_x, "yx"),
        )
        for v in (v1, v2):
            if isinstance(v, Failure):
                done = tuple(u for u in (v1, v2) if isinstance(u, Verdict))
                return Judgement(self.name, x, y, prompt_id, None, done, v)
        assert isinstance(v1, Verdict) and isinstance(v2, Verdict)
        return Judgement(
            self.name, x, y, prompt_id, combine_orders(v1.for_x(), v2.for_x()), (v1, v2)
        )


_JUDGE_ONLY = {"template", "verdict_pattern", "verdict_labels"}


def judges_from_toml(data: Mapping[str, Any], where: str = "judges") -> list[Judge]:
    """The ``[[judges]]`` tables of parsed TOML: endpoint keys as in ``[[models]]`` (the
    endpoint's ``system_prompt`` is the judging instruction, by default
    :data:`DEFAULT_JUDGE_SYSTEM_PROMPT`; ``params`` default to ``temperature = 0``), plus
    optional ``template``, ``verdict_pattern`` and ``verdict_labels``."""
    entries = data.get("judges")
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{where}: no [[judges]] tables; add one per judge")
    defaults = data.get("defaults") or {}
    out = []
    for k, entry in enumerate(entries):
        here = f"{where}: [[judges]] #{k + 1}"
        ep_part = {key: v for key, v in entry.items() if key not in _JUDGE_ONLY}
        if "name" in ep_part:  # a judge votes as an annotator of that name
            ep_part["name"] = checked_name(ep_part["name"], f"{here}: name")
        ep_part.setdefault("system_prompt", DEFAULT_JUDGE_SYSTEM_PROMPT)
        ep_part.setdefault("params", {"temperature": 0})
        endpoint = endpoint_from_mapping(ep_part, here, defaults)
        parser = VerdictParser(
            entry.get("verdict_pattern", VerdictParser.pattern),
            entry.get("verdict_labels", _DEFAULT_LABELS),
        )
        out.append(
            Judge(endpoint.name, endpoint, entry.get("template", DEFAULT_JUDGE_TEMPLATE), parser)
        )
    names = [j.name for j in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{where}: judge names must be unique; repeated: {dup}")
    return out


def read_judges(path: str | Path) -> list[Judge]:
    """The judges of a judges.toml file."""
    return judges_from_toml(load_toml(path), str(path))


def demo_judges(base_url: str, names: Sequence[str] | None = None) -> list[Judge]:
    """The demo judges served by the demo server at ``base_url`` (all five by default)."""
    from .endpoints.demo import DEMO_JUDGES

    chosen = [j.name for j in DEMO_JUDGES] if names is None else list(names)
    return [
        Judge(
            n,
            ModelEndpoint(
                n, base_url, n, system_prompt=DEFAULT_JUDGE_SYSTEM_PROMPT, params={"temperature": 0}
            ),
        )
        for n in chosen
    ]
