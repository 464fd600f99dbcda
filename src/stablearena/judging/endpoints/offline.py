"""Offline models: answers read from a file keyed by prompt id.

The file is Arena-Hard-Auto's ``model_answer`` JSONL, one answer per line, in either of its two
shapes:

* v0.1: ``{"question_id", "model_id", "choices": [{"index": 0, "turns": [{"content": …}]}]}``
  (the answer is the last turn of the first choice);
* v2: ``{"uid", "model", "messages": [{"role": "user", …}, {"role": "assistant", "content":
  {"answer": …}}]}`` (the answer is the last assistant message; its content a string or a
  table with ``answer``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...errors import InputError
from ...inputs import jsonl_records
from .client import Answer, Failure, Result, estimate_tokens
from .config import OfflineModel

__all__ = ["OfflineClient", "read_model_answers"]


def _text(row: dict[str, Any]) -> str | None:
    choices = row.get("choices")
    if isinstance(choices, list) and choices:
        turns = choices[0].get("turns") if isinstance(choices[0], dict) else None
        if isinstance(turns, list) and turns:
            last = turns[-1]
            return last.get("content") if isinstance(last, dict) else str(last)
    messages = row.get("messages")
    if isinstance(messages, list):
        for m in reversed(messages):
            if isinstance(m, dict) and m.get("role") == "assistant":
                content = m.get("content")
                return content.get("answer") if isinstance(content, dict) else content
    return None


def read_model_answers(path: str | Path, model_id: str | None = None) -> dict[str, str]:
    """``{prompt id: answer text}`` from a ``model_answer`` JSONL file (``model_id``: keep that
    model's rows; needed when the file holds several models)."""
    path = Path(path)
    rows: dict[str, dict[str, str]] = {}
    first: dict[tuple[str, str], str] = {}
    for where, row, _ in jsonl_records(path, "answer"):
        qid = row.get("question_id", row.get("uid"))
        text = _text(row)
        if qid is None or text is None:
            raise InputError(
                f"{where}: not a model_answer row (needs question_id or uid, and "
                "choices[0].turns or an assistant message)"
            )
        model = row.get("model_id", row.get("model", ""))
        for field, value in (("question_id/uid", qid), ("model_id/model", model)):
            if not isinstance(value, (str, int)) or isinstance(value, bool):
                raise InputError(f"{where}: the field {field} must be a string, not {value!r}")
        if not isinstance(text, str):
            raise InputError(f"{where}: the answer's text must be a string, not {text!r}")
        key = (str(model), str(qid))
        if key in first:
            raise InputError(
                f"{where}: a second answer of {key[0]!r} to {key[1]!r} (the first: "
                f"{first[key]}); keep one"
            )
        first[key] = where
        rows.setdefault(str(model), {})[str(qid)] = text
    if model_id is not None:
        if model_id not in rows:
            raise InputError(f"{path}: no rows of model {model_id!r}; it holds {sorted(rows)}")
        return rows[model_id]
    if len(rows) > 1:
        raise InputError(f"{path} holds several models {sorted(rows)}; set model_id")
    return next(iter(rows.values()), {})


class OfflineClient:
    """An offline model behind the same ``answer`` call as :class:`EndpointClient`."""

    def __init__(self, model: OfflineModel):
        self.model = model
        self.answers = read_model_answers(model.answers, model.model_id)

    @property
    def name(self) -> str:
        """The model's name in the arena."""
        return self.model.name

    def __repr__(self) -> str:
        return f"OfflineClient({self.model.name!r}, {str(self.model.answers)!r})"

    async def answer(self, prompt: str, prompt_id: str | None = None) -> Result:
        """The stored answer for ``prompt_id`` (a :class:`Failure` ``no_answer`` if none)."""
        text = self.answers.get(str(prompt_id)) if prompt_id is not None else None
        if text is None:
            return Failure(
                self.name,
                "no_answer",
                f"no answer for prompt id {prompt_id!r} in {self.model.answers}",
                attempts=0,
            )
        n = estimate_tokens(text)
        return Answer(
            self.name, text, "stop", 0.0, 0.0, estimate_tokens(prompt), n, "estimated", attempts=0
        )

    async def aclose(self) -> None:
        """Nothing to close."""
