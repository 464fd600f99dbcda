"""Arena-Hard-Auto compatibility: its files read and written, its run as our battles, its
baseline-anchored score table (docs/guides/models-and-judges.md, "Arena-Hard-Auto").

Arena-Hard-Auto (github.com/lmarena/arena-hard-auto) keeps a benchmark run under
``data/<bench_name>/``:

* ``question.jsonl``: one question a line, ``{"uid", "category", "prompt", …}`` (v2) or
  ``{"question_id", "category", "turns": [{"content"}], …}`` (v0.1);
* ``model_answer/<model>.jsonl``: one answer a line, ``{"uid", "ans_id", "model", "messages":
  [{"role": "user", …}, {"role": "assistant", "content": {"answer": TEXT}}], "tstamp",
  "metadata": {"token_len", "header_count": {h1…h6}, "list_count": {ordered, unordered},
  "bold_count": {"**", "__"}}}`` (v2) or ``{"question_id", "answer_id", "model_id",
  "choices": [{"index", "turns": [{"content", "token_len"}]}], "conv_metadata"}`` (v0.1);
* ``model_judgment/<judge>/<model>.jsonl``: one judgment a line, ``{"uid", "category",
  "judge", "model", "baseline", "games": [G1, G2]}`` where game 1 shows the baseline as
  assistant A and the model as B, game 2 the other way round, each ``{"score": LABEL,
  "judgment": …}`` with LABEL one of ``A>>B A>B A=B B>A B>>A`` (or the mirrored ``A<<B``…),
  ``None`` when the judge's reply had none (v0.1: ``question_id`` instead of ``uid``);
* ``config/*.yaml``: the judge settings (``judge_model``, ``temperature``, ``max_tokens``,
  ``regex_patterns``, ``prompt_template`` with ``{QUESTION}``, ``{ANSWER_A}``, ``{ANSWER_B}``,
  ``model_list``, ``reference``, ``bench_name``; v0.1 also ``baseline_model``,
  ``system_prompt``, ``regex_pattern`` and a one-element list as ``prompt_template``).

Its scores: each judgment is two games; a game's label gives the model 1, ½ or 0 and a
strong verdict (``>>``) counts ``weight`` = 3 times. The plain table is each model's mean
score against the baseline with a bootstrap of the games; the style-controlled table is a
Bradley–Terry fit with the answers' length and markdown differences as covariates, the score
the model's win probability against the baseline. Intervals are the bootstrap's 5 % and 95 %
quantiles (a 90 % interval), 100 rounds.

Every reader keeps each line's whole record and its text, so that read → write gives the
file's lines back byte for byte (blank lines aside) and read → write → read equal data; new
records are written as ``json.dumps(record, ensure_ascii=False)``, as Arena-Hard-Auto's
scripts write its answer and judgment files.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..data.battles import Battles, Outcome
from ..data.style_features import STYLE_FEATURES, count_tokens, normalized_difference
from ..errors import InputError
from ..inputs import check_depth, jsonl_records, read_input_text

__all__ = [
    "LABELS",
    "Question",
    "AnswerRecord",
    "Judgment",
    "JudgeSettings",
    "ArenaHardRun",
    "read_questions",
    "prompt_categories",
    "write_questions",
    "read_answers",
    "write_answers",
    "read_judgments",
    "write_judgments",
    "read_judge_settings",
    "write_judge_settings",
    "read_run",
    "write_run",
    "name_path",
    "model_file_name",
    "check_run_names",
    "label_score",
    "extract_label",
    "answer_metadata",
    "LENGTH_FIELD",
    "judgment_battles",
    "self_judged_row",
    "BaselineBoard",
    "baseline_board",
    "export_journal",
    "simulate_run",
    "apply_judge_settings",
    "CategorySettings",
    "CATEGORIES",
    "ARENA_HARD_PROMPT",
    "CREATIVE_WRITING_PROMPT",
    "read_endpoints",
    "endpoint_from_settings",
    "read_generation_settings",
    "read_board",
    "board_metrics",
    "fitted_metrics",
]

#: Arena-Hard-Auto's verdict labels and the score each gives assistant A, and whether strong.
LABELS: dict[str, tuple[float, bool]] = {
    "A>>B": (1.0, True),
    "A>B": (1.0, False),
    "A=B": (0.5, False),
    "B>A": (0.0, False),
    "B>>A": (0.0, True),
    "A<<B": (0.0, True),
    "A<B": (0.0, False),
    "B=A": (0.5, False),
    "B<A": (1.0, False),
    "B<<A": (1.0, True),
}

#: Arena-Hard-Auto's default verdict patterns (tried in order on the upper-cased reply; the
#: last match of the first pattern that matches is the verdict).
DEFAULT_PATTERNS: tuple[str, ...] = (r"\[\[([AB<>=]+)\]\]", r"\[([AB<>=]+)\]")


def label_score(label: str, where: str) -> tuple[float, bool]:
    """(score of assistant A, strong) of a verdict label; an unknown label is an error naming
    ``where`` (file and line)."""
    try:
        return LABELS[label]
    except (KeyError, TypeError):
        raise InputError(
            f"{where}: verdict label {label!r} is not one of {', '.join(LABELS)}; fix the "
            "label or set it to null (a reply without a verdict)."
        ) from None


def extract_label(text: str, patterns: Sequence[str] = DEFAULT_PATTERNS) -> str | None:
    """The verdict label of a judge's reply as Arena-Hard-Auto reads it: for each pattern in
    turn, the last non-empty match on the upper-cased text; ``None`` if no pattern matches."""
    for pattern in patterns:
        found = [m for m in re.findall(pattern, text.upper()) if m != ""]
        if found:
            return found[-1].strip("\n")
    return None


# ---------------------------------------------------------------------------------- files
#: Longest part of a file name (between two ``/``) most file systems allow, in bytes.
_NAME_BYTES = 255


def name_path(
    directory: str | Path,
    name: str,
    *,
    suffix: str = ".jsonl",
    within: str | Path | None = None,
) -> Path:
    """The file or directory of ``name`` inside ``directory``: ``directory/<name><suffix>``
    (``suffix=""``: a judge's directory, ``model_judgment/{judge}``, as Arena-Hard-Auto's
    ``gen_judgment.py`` makes it and its ``show_result.py -j JUDGE`` reads it: a ``/`` in the
    name is a subdirectory, ``openai/gpt-4o`` is ``model_judgment/openai/gpt-4o/``). A model's
    file is named by :func:`model_file_name` first (its readers do not walk subdirectories).
    The readers (:func:`read_run`) walk the subdirectories and take each record's name from
    the record, so a file is read back under its name.

    Refused with an :class:`InputError` naming the name and what to do: a name that is not a
    name (:func:`stablearena.data.names.name_problem`: control characters such as NUL, invisible
    ones), an empty part (a leading ``/`` — an absolute name —, a trailing or doubled one), a
    part ``.`` or ``..``, a backslash (a separator on Windows), a part longer than 255 bytes,
    a directory part ending in ``suffix`` (``a.jsonl/b`` would make a directory where the file
    of ``a`` goes); and a path that, with every symbolic link resolved, lies outside
    ``within`` (default ``directory``) or is neither a regular file (a directory, with
    ``suffix=""``) nor absent: a FIFO, a device, a link out of the run directory. Two distinct
    names give two distinct paths, neither inside the other."""
    from ..data.names import name_problem

    directory = Path(directory)
    if not isinstance(name, str):
        raise InputError(f"a model or judge name must be a string, not {name!r}.")
    problem = name_problem(name)
    if problem:
        raise InputError(f"the model or judge name {name!r} {problem}; rename it.")
    parts = name.split("/")
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        why = None
        if part == "":
            why = "has an empty part (a leading /, an absolute name, or a doubled or trailing /)"
        elif part in (".", ".."):
            why = f"has a part {part!r}, which names a directory, not a file"
        elif "\\" in part:
            why = "holds a backslash (a path separator on Windows)"
        elif len((part + (suffix if last else "")).encode("utf-8")) > _NAME_BYTES:
            why = f"has a part longer than {_NAME_BYTES} bytes (the longest file name)"
        elif not last and suffix and part.endswith(suffix):
            why = f"has a directory part ending in {suffix} (where another name's file goes)"
        if why:
            raise InputError(
                f"the model or judge name {name!r} {why}; it cannot name a file inside "
                f"{directory}: rename it (a / stands for a subdirectory, as in "
                "Arena-Hard-Auto's files)."
            )
    path = directory.joinpath(*parts[:-1], parts[-1] + suffix)
    _check_inside(path, Path(within) if within is not None else directory, repr(name))
    return path


def model_file_name(name: str) -> str:
    """The file name (less ``.jsonl``) of a model's answers and judgments: its name after the
    last ``/`` (``google/gemma-3-27b-it`` → ``gemma-3-27b-it``), as Arena-Hard-Auto's users
    name them (the file by the short name of its settings, the record's ``model`` the full
    one) and as its ``show_result.py`` shows them (``x.split('/')[-1]``); its readers take
    ``*.jsonl`` of the directory only, so a nested file would never be read. The record keeps
    the full name, and :func:`read_run` reads it from there. Two models with the same short
    name would be one file (and one row of ``show_result.py``): :func:`write_run` refuses
    them, naming both."""
    from ..data.names import name_problem

    if not isinstance(name, str):
        raise InputError(f"a model name must be a string, not {name!r}.")
    problem = name_problem(name)
    if problem:
        raise InputError(f"the model name {name!r} {problem}; rename it.")
    for part in name.split("/"):
        if part in ("", ".", "..") or "\\" in part:
            raise InputError(
                f"the model name {name!r} has a part {part!r} (an empty part, . or .., or a "
                "backslash): it would not name a file the same way on every system; rename it."
            )
    return name.rsplit("/", 1)[-1]


def _check_inside(path: Path, within: Path, what: str) -> None:
    """Raise :class:`InputError` unless ``path``, every link resolved, lies inside ``within``
    and is absent, a regular file or a directory (the kind its place needs is the caller's)."""
    base = os.path.realpath(within)
    real = os.path.realpath(path)
    if os.path.commonpath([base, real]) != base:
        raise InputError(
            f"{path}: the file of {what} resolves to {real}, outside {within} (a symbolic link "
            "out of the run directory); remove the link or write the run elsewhere."
        )
    try:
        mode = os.stat(real).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError(f"{path}: cannot write the file of {what} ({exc.strerror}).") from None
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise InputError(
            f"{path}: the file of {what} exists and is not a regular file (a FIFO, a device or "
            "a socket); remove it or write the run elsewhere."
        )


def _line(item: Any) -> str:
    """The JSON line of a read item: its line as read, or its record dumped when new."""
    if item.line is not None:
        return item.line
    return json.dumps(item.record, ensure_ascii=False, allow_nan=False)


def _write_jsonl(items: Iterable[Any], path: str | Path) -> None:
    from ..atomic import atomic_write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, "".join(_line(item) + "\n" for item in items))


def _field(rec: Mapping[str, Any], names: Sequence[str], where: str, what: str) -> Any:
    for n in names:
        if n in rec and rec[n] is not None:
            return rec[n]
    raise InputError(f"{where}: the {what} has no {' or '.join(names)} field; add it.")


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:60]


def _field_name(rec: Mapping[str, Any], names: Sequence[str]) -> str:
    return next(n for n in names if rec.get(n) is not None)


def _id_field(rec: Mapping[str, Any], names: Sequence[str], where: str, what: str) -> str:
    """A question id (``uid``, ``question_id``): a string, or a whole number read as one."""
    value = _field(rec, names, where, what)
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    raise InputError(
        f"{where}: the {what}'s field {_field_name(rec, names)!r} must be a string (the "
        f"question's id), not {_shown(value)}."
    )


def _name_field(rec: Mapping[str, Any], names: Sequence[str], where: str, what: str) -> str:
    """A model's, judge's or baseline's name: a non-empty string."""
    value = _field(rec, names, where, what)
    if not isinstance(value, str) or not value:
        raise InputError(
            f"{where}: the {what}'s field {_field_name(rec, names)!r} must be a model's name (a "
            f"non-empty string), not {_shown(value)}."
        )
    return value


def _optional_text(rec: Mapping[str, Any], key: str, where: str, what: str) -> str:
    """An optional text field (``category``): a string, ``""`` when absent or null."""
    value = rec.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError(
            f"{where}: the {what}'s field {key!r} must be a string or null, not {_shown(value)}."
        )
    return value


def _text(value: Any) -> str:
    """An answer's or prompt's text: a string, ``{"answer": …}`` or a list of
    ``{"content": …}`` turns (the first)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("answer", "content", "text"):
            if key in value:
                return _text(value[key])
    if isinstance(value, list) and value:
        return _text(value[0])
    return ""


# ---------------------------------------------------------------------------------- questions
@dataclass(frozen=True)
class Question:
    """One question: ``uid``, ``prompt`` text, ``category`` (``""`` if none) and the record."""

    uid: str
    prompt: str
    category: str
    record: Mapping[str, Any] = field(compare=False, repr=False)
    line: str | None = field(default=None, compare=False, repr=False)


def read_questions(path: str | Path) -> list[Question]:
    """The questions of a ``question.jsonl`` (v2 ``uid``/``prompt`` or v0.1
    ``question_id``/``turns``); uids must be unique and prompts non-empty."""
    path = Path(path)
    out: list[Question] = []
    seen: dict[str, str] = {}
    for where, rec, line in jsonl_records(path, "question"):
        uid = _id_field(rec, ("uid", "question_id"), where, "question")
        prompt = _text(_field(rec, ("prompt", "turns"), where, "question"))
        if not prompt.strip():
            raise InputError(
                f"{where}: question {uid!r} has an empty prompt (field 'prompt' or 'turns': a "
                "text, or [{'content': TEXT}])."
            )
        if uid in seen:
            raise InputError(f"{where}: question uid {uid!r} repeats {seen[uid]}.")
        seen[uid] = where
        category = _optional_text(rec, "category", where, "question")
        out.append(Question(uid, prompt, category, rec, line))
    if not out:
        raise InputError(f"{path}: no questions.")
    return out


def prompt_categories(path: str | Path) -> dict[str, str]:
    """Each prompt's ``category`` in a JSON Lines prompt file (an Arena-Hard-Auto
    ``question.jsonl``: ``uid`` or ``question_id``; or ours: ``id``, ``prompt_id``), by prompt
    id; ``{}`` for another format or a file without categories. A category that is not a
    string is an :class:`InputError` naming the line."""
    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return {}
    out = {}
    for where, rec, _ in jsonl_records(path, "prompt"):
        pid = next((rec[k] for k in ("id", "prompt_id", "question_id", "uid") if k in rec), None)
        cat = _optional_text(rec, "category", where, "prompt")
        if pid is not None and cat:
            out[str(pid)] = cat
    return out


def write_questions(questions: Iterable[Question], path: str | Path) -> None:
    """Write questions as ``question.jsonl`` (each question's record as it was read)."""
    _write_jsonl(questions, path)


# ---------------------------------------------------------------------------------- answers
@dataclass(frozen=True)
class AnswerRecord:
    """One model's answer to one question: the text and the style metadata (``None`` if the
    file has none), and the record."""

    uid: str
    model: str
    text: str
    metadata: Mapping[str, Any] | None
    record: Mapping[str, Any] = field(compare=False, repr=False)
    line: str | None = field(default=None, compare=False, repr=False)


def read_answers(path: str | Path) -> list[AnswerRecord]:
    """The answers of a ``model_answer/<model>.jsonl`` file (v2 ``messages`` or v0.1
    ``choices[].turns``); one answer per uid."""
    path = Path(path)
    out: list[AnswerRecord] = []
    seen: dict[str, str] = {}
    for where, rec, line in jsonl_records(path, "answer"):
        uid = _id_field(rec, ("uid", "question_id"), where, "answer")
        model = _name_field(rec, ("model", "model_id"), where, "answer")
        if out and model != out[0].model:
            raise InputError(
                f"{where}: an answer of model {model!r} in the file of {out[0].model!r} "
                f"({out[0].uid!r} and the lines before it); one model a file: move it to its "
                "own file."
            )
        if "messages" in rec:
            if not isinstance(rec["messages"], list):
                raise InputError(
                    f"{where}: the answer's field 'messages' must be a list of "
                    f"{{'role', 'content'}} messages, not {_shown(rec['messages'])}."
                )
            turns = [m for m in rec["messages"] if isinstance(m, Mapping)]
            said = [m for m in turns if m.get("role") == "assistant"]
            if not said:
                raise InputError(f"{where}: the answer's messages have no assistant turn.")
            text = _text(said[-1].get("content"))
        elif "choices" in rec:
            try:
                text = _text(rec["choices"][0]["turns"][0].get("content"))
            except (IndexError, KeyError, TypeError, AttributeError):
                raise InputError(
                    f"{where}: choices must be [{{'turns': [{{'content': TEXT}}]}}]."
                ) from None
        else:
            raise InputError(f"{where}: the answer has neither messages (v2) nor choices (v0.1).")
        if uid in seen:
            raise InputError(
                f"{where}: a second answer of {model!r} to question {uid!r} (the first: "
                f"{seen[uid]}); keep one."
            )
        seen[uid] = where
        key = "metadata" if "metadata" in rec else "conv_metadata"
        meta = rec.get(key)
        if meta is not None and not isinstance(meta, Mapping):
            raise InputError(
                f"{where}: the answer's field {key!r} must be an object (token_len, "
                f"header_count, …) or null, not {_shown(meta)}."
            )
        if meta is not None and _length_key(meta) is not None:
            for name in (_length_key(meta), *_STYLE_KEYS[1:]):
                _count(meta.get(name, 0), f"{where}: the answer's field {key}.{name}")
        out.append(AnswerRecord(uid, model, text, meta, rec, line))
    return out


def write_answers(answers: Iterable[AnswerRecord], path: str | Path) -> None:
    """Write answers as a ``model_answer/<model>.jsonl`` file."""
    _write_jsonl(answers, path)


_HEADER_LEVEL = re.compile(r"^(#{1,6})\s", re.MULTILINE)
_CODE_BLOCK = re.compile(r"```[^`]*```")
_ORDERED = re.compile(r"^\s*\d+\.\s", re.MULTILINE)
_UNORDERED = re.compile(r"^\s*[-*+]\s", re.MULTILINE)


def answer_metadata(text: str) -> dict[str, Any]:
    """Arena-Hard-Auto's style metadata of an answer: its length first, then the markdown
    counts with fenced code removed (as its ``utils/add_markdown_info.py`` counts them).

    Its length is ``token_len``, tiktoken's count in the ``gpt-4o`` encoding (o200k_base),
    whose data tiktoken downloads at first use and no package here ships; ours is the offline
    count of words and punctuation marks (:func:`~stablearena.data.style_features.count_tokens`),
    named for what it is, ``word_and_mark_count``. Its ``show_result.py`` takes the first
    field as the length whatever its name, so the style-controlled board reads it; a length
    in other units changes its length coefficient, not which answers are longer."""
    plain = _CODE_BLOCK.sub("", text)
    levels = [len(m) for m in _HEADER_LEVEL.findall(plain)]
    return {
        LENGTH_FIELD: count_tokens(text),
        "header_count": {f"h{k}": levels.count(k) for k in range(1, 7)},
        "list_count": {
            "ordered": len(_ORDERED.findall(plain)),
            "unordered": len(_UNORDERED.findall(plain)),
        },
        "bold_count": {
            "**": len(re.findall(r"\*\*[^*\n]+\*\*", plain)),
            "__": len(re.findall(r"__[^_\n]+__", plain)),
        },
    }


#: The style metadata an answer's style is read from: a count, or an object of counts.
_STYLE_KEYS = ("token_len", "header_count", "list_count", "bold_count")
#: The name of the length our answer metadata carries (:func:`answer_metadata`).
LENGTH_FIELD = "word_and_mark_count"


def _length_key(meta: Mapping[str, Any]) -> str | None:
    """The field of an answer's metadata that holds its length: Arena-Hard-Auto's
    ``token_len``, or our ``word_and_mark_count``; ``None`` without either."""
    return next((k for k in ("token_len", LENGTH_FIELD) if k in meta), None)


def _count(value: Any, what: str) -> float:
    """A style count (a finite number >= 0) or the sum of an object of them; anything else is
    an :class:`InputError` starting with ``what`` (the file, line and field)."""
    values = list(value.values()) if isinstance(value, Mapping) else [value]
    for v in values:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        if not ok or not math.isfinite(v) or v < 0:
            raise InputError(
                f"{what} = {_shown(value)} is not a non-negative count (a number, or an "
                "object of numbers); fix it or remove the metadata."
            )
    return float(sum(values))


def _style_vector(meta: Mapping[str, Any] | None, text: str, where: str) -> np.ndarray:
    """(tokens, headers, list items, bold) of an answer: its metadata when present, else
    counted from its text."""
    if meta is None or _length_key(meta) is None:
        meta = answer_metadata(text)
    keys = (_length_key(meta), *_STYLE_KEYS[1:])
    return np.array([_count(meta.get(key, 0), f"{where}: metadata {key}") for key in keys])


# ---------------------------------------------------------------------------------- judgments
@dataclass(frozen=True)
class Judgment:
    """One judgment of ``model`` against ``baseline`` on question ``uid`` by ``judge``: the two
    games' labels (game 1: baseline shown as A; game 2: model shown as A), ``None`` for a
    game without a verdict; and the record."""

    uid: str
    model: str
    baseline: str
    judge: str
    category: str
    labels: tuple[str | None, str | None]
    record: Mapping[str, Any] = field(compare=False, repr=False)
    where: str = field(default="", compare=False, repr=False)
    line: str | None = field(default=None, compare=False, repr=False)


def read_judgments(
    path: str | Path,
    *,
    judge: str | None = None,
    baseline: str | None = None,
    root: str | Path | None = None,
) -> list[Judgment]:
    """The judgments of a ``model_judgment/<judge>/<model>.jsonl`` file. ``judge`` and
    ``baseline`` fill records without those fields (v0.1 has no ``baseline``); without
    ``judge``, a record without one is the judge's whose directory holds the file: the path
    from ``root`` (the ``model_judgment`` directory; default the file's parent directory) to
    the file, less the model's own part (:func:`name_path`). A judgment repeated (the same
    judge, model, baseline and question) is an error naming both lines."""
    path = Path(path)
    out: list[Judgment] = []
    for where, rec, line in jsonl_records(path, "judgment"):
        uid = _id_field(rec, ("uid", "question_id"), where, "judgment")
        model = _name_field(rec, ("model",), where, "judgment")
        games = rec.get("games")
        if not isinstance(games, list) or len(games) != 2:
            raise InputError(
                f"{where}: the judgment's field 'games' must be a list of the two games (both "
                f"orders), not {_shown(games)}."
            )
        labels: list[str | None] = []
        for k, g in enumerate(games):
            if g is not None and not isinstance(g, Mapping):
                raise InputError(
                    f"{where}: the judgment's field games[{k}] must be an object with a score "
                    f"or null, not {_shown(g)}."
                )
            lab = g.get("score") if g is not None else None
            if lab is not None:
                label_score(lab, f"{where}, field games[{k}].score")
            labels.append(lab)
        base = _name_field(rec, ("baseline",), where, "judgment") if rec.get("baseline") else None
        base = base or baseline
        if base is None:
            raise InputError(
                f"{where}: the judgment names no baseline (v0.1 files): give the baseline model."
            )
        if rec.get("judge"):
            jname = _name_field(rec, ("judge",), where, "judgment")
        else:
            jname = judge or _judge_of(path, Path(root) if root is not None else None, model)
        category = _optional_text(rec, "category", where, "judgment")
        out.append(
            Judgment(uid, model, base, jname, category, (labels[0], labels[1]), rec, where, line)
        )
    _no_repeats(out)
    return out


def _judge_of(path: Path, root: Path | None, model: str) -> str:
    """The judge whose directory under ``root`` holds ``path``, the file of ``model``."""
    if root is None:
        return path.parent.name
    parts = path.relative_to(root).parts
    mine = (*model.split("/")[:-1], model.split("/")[-1] + ".jsonl")
    if len(mine) > 1 and len(parts) > len(mine) and parts[-len(mine) :] == mine:
        return "/".join(parts[: -len(mine)])  # nested by the model's full name
    return "/".join(parts[:-1])  # named by its short name (model_file_name)


def _no_repeats(judgments: Iterable[Judgment]) -> None:
    """Raise :class:`InputError` when two judgments are of the same judge, model, baseline and
    question, naming both places."""
    seen: dict[tuple[str, str, str, str], str] = {}
    for j in judgments:
        key = (j.judge, j.model, j.baseline, j.uid)
        if key in seen:
            raise InputError(
                f"{j.where}: a second judgment by {j.judge!r} of {j.model!r} against "
                f"{j.baseline!r} on question {j.uid!r} (the first: {seen[key]}); keep one."
            )
        seen[key] = j.where


def write_judgments(judgments: Iterable[Judgment], path: str | Path) -> None:
    """Write judgments as a ``model_judgment/<judge>/<model>.jsonl`` file."""
    _write_jsonl(judgments, path)


# ---------------------------------------------------------------------------------- settings
#: Arena-Hard-Auto's judging instruction (its ``utils/judge_utils.py``, ``OG_ARENA_HARD_PROMPT``;
#: v0.1's ``config/judge_config.yaml`` ``system_prompt``), word for word: the judge is asked
#: for one of the five labels. Arena-Hard-Auto is Apache-2.0 licensed.
ARENA_HARD_PROMPT = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by "
    "two AI assistants to the user prompt displayed below. You will be given assistant A's "
    "answer and assistant B's answer. Your job is to evaluate which assistant's answer is "
    "better.\n\nBegin your evaluation by generating your own answer to the prompt. You must "
    "provide your answers before judging any answers.\n\nWhen evaluating the assistants' "
    "answers, compare both assistants' answers with your answer. You must identify and "
    "correct any mistakes or inaccurate information.\n\n"
)
_PROMPT_REST = (
    "Then consider if the assistant's answers are helpful, relevant, and concise. Helpful "
    "means the answer correctly responds to the prompt or follows the instructions. Note when "
    "user prompt has any ambiguity or more than one interpretation, it is more helpful and "
    "appropriate to ask for clarifications or more information from the user than providing "
    "an answer based on assumptions. Relevant means all parts of the response closely connect "
    "or are appropriate to what is being asked. Concise means the response is clear and not "
    "verbose or excessive.\n\nThen consider the creativity and novelty of the assistant's "
    "answers when needed. Finally, identify any missing important information in the "
    "assistants' answers that would be beneficial to include when responding to the user "
    "prompt.\n\nAfter providing your explanation, you must output only one of the following "
    "choices as your final verdict with a label:\n\n1. Assistant A is significantly better: "
    "[[A>>B]]\n2. Assistant A is slightly better: [[A>B]]\n3. Tie, relatively the same: "
    "[[A=B]]\n4. Assistant B is slightly better: [[B>A]]\n5. Assistant B is significantly "
    'better: [[B>>A]]\n\nExample output: "My final verdict is tie: [[A=B]]".'
)
ARENA_HARD_PROMPT += _PROMPT_REST
#: Its creative-writing instruction: the same without the judge's own answer first.
CREATIVE_WRITING_PROMPT = (
    "Please act as an impartial judge and evaluate the quality of the responses provided by "
    "two AI assistants to the user prompt displayed below. You will be given assistant A's "
    "answer and assistant B's answer. Your job is to evaluate which assistant's answer is "
    "better.\n\nWhen evaluating the assistants' answers, compare both assistants' answers. "
    "You must identify and correct any mistakes or inaccurate information.\n\n" + _PROMPT_REST
)


@dataclass(frozen=True)
class CategorySettings:
    """How one category is judged: its baseline model and its judge's system prompt."""

    baseline: str
    system_prompt: str


#: Arena-Hard-Auto's per-category settings (its ``utils/judge_utils.py``, ``JUDGE_SETTINGS``:
#: v2.0's ``hard_prompt`` (with its sub-categories ``coding`` and ``math``) and
#: ``creative_writing``, and v0.1's one category), used when a settings file gives none.
CATEGORIES: Mapping[str, CategorySettings] = {
    "hard_prompt": CategorySettings("o3-mini-2025-01-31", ARENA_HARD_PROMPT),
    "coding": CategorySettings("o3-mini-2025-01-31", ARENA_HARD_PROMPT),
    "math": CategorySettings("o3-mini-2025-01-31", ARENA_HARD_PROMPT),
    "creative_writing": CategorySettings("gemini-2.0-flash-001", CREATIVE_WRITING_PROMPT),
    "arena-hard-v0.1": CategorySettings("gpt-4-0314", ARENA_HARD_PROMPT),
}

#: Every label Arena-Hard-Auto's ``show_result.py`` scores, to A, B or a tie.
_AH_LABELS = {k: ("A" if s == 1.0 else "B" if s == 0.0 else "tie") for k, (s, _) in LABELS.items()}


@dataclass(frozen=True)
class JudgeSettings:
    """Arena-Hard-Auto's judge settings (``config/arena-hard-*.yaml``; v0.1
    ``config/judge_config.yaml``). ``patterns``: the verdict regexes in order (v0.1's single
    ``regex_pattern`` becomes one); ``template``: the user message with ``{QUESTION}``,
    ``{ANSWER_A}``, ``{ANSWER_B}`` (v0.1's ``{question_1}``, ``{answer_1}``, ``{answer_2}`` are
    read as those). ``categories``: each category's baseline and system prompt — the file's
    ``judge_settings`` mapping (our key, in the shape of its code's ``JUDGE_SETTINGS``), or
    v0.1's ``baseline_model`` and ``system_prompt`` for every category, or else its code's
    (:data:`CATEGORIES`). ``reference``: the models whose answers are the judge's reference
    (v2 ``reference: [MODEL…]``; v0.1 ``reference: true`` with ``ref_model``). ``rule``:
    how the verdict is read — ``"v2"`` (every pattern in turn on the upper-cased reply, the
    last match of the first that matches) or ``"v0.1"`` (one pattern, case as written, its
    matches all one label). ``record``: the whole YAML mapping, written back as it was."""

    judge_model: str
    bench_name: str
    temperature: float
    max_tokens: int
    patterns: tuple[str, ...]
    template: str
    model_list: tuple[str, ...]
    baseline: str | None = None
    system_prompt: str | None = None
    record: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    categories: Mapping[str, CategorySettings] = field(default_factory=lambda: dict(CATEGORIES))
    reference: tuple[str, ...] = ()
    rule: str = "v2"
    source: str = field(default="judge settings", compare=False)

    def category(self, name: str) -> CategorySettings:
        """The settings of category ``name``; an unknown one is an :class:`InputError` naming
        the file and the categories it has."""
        try:
            return self.categories[name]
        except KeyError:
            raise InputError(
                f"{self.source}: no judge settings for category {name!r} (its baseline and "
                f"system prompt); the settings have {sorted(self.categories)}: add it under "
                "judge_settings."
            ) from None

    def parser(self) -> Any:
        """Our :class:`~stablearena.judging.judges.VerdictParser` reading a reply as Arena-Hard-Auto
        does: every pattern, in order; v2 on the upper-cased reply, the last match of the
        first pattern that matches; v0.1 case as written, one label required. A label that
        its ``show_result.py`` does not score (``[A]``, ``[[A>B>A]]``) is a failed judgement,
        as a reply without any (it would stop ``show_result.py``)."""
        from .judges import VerdictParser

        v2 = self.rule == "v2"
        return VerdictParser(
            self.patterns[0], _AH_LABELS, self.patterns[1:], upper=v2, unique=not v2
        )

    def ours(self) -> dict[str, Any]:
        """The judge keys of our judges.toml that reproduce these settings: ``template``,
        ``verdict_pattern`` and ``verdict_patterns`` (the rest, tried in order),
        ``verdict_upper``, ``verdict_labels`` (every label ``show_result.py`` scores, to A/B/
        tie), ``params`` (temperature, max_tokens) and ``system_prompt`` (the first
        category's, or the file's)."""
        tpl = self.template
        for theirs, mine in (
            ("{QUESTION}", "{prompt}"),
            ("{ANSWER_A}", "{answer_a}"),
            ("{ANSWER_B}", "{answer_b}"),
        ):
            tpl = tpl.replace(theirs, mine)
        first = next(iter(self.categories.values()), None)
        return {
            "template": tpl,
            "verdict_pattern": self.patterns[0],
            "verdict_patterns": list(self.patterns[1:]),
            "verdict_upper": self.rule == "v2",
            "verdict_labels": dict(_AH_LABELS),
            "params": {"temperature": self.temperature, "max_tokens": self.max_tokens},
            "system_prompt": self.system_prompt or (first.system_prompt if first else None),
        }


def apply_judge_settings(
    judge: Any,
    settings: JudgeSettings,
    categories: Mapping[str, str] | None = None,
    default_category: str | None = None,
) -> Any:
    """Our :class:`~stablearena.judging.judges.Judge` judging as Arena-Hard-Auto's settings say: its
    template, every verdict pattern as it reads them (:meth:`JudgeSettings.parser`), its
    temperature and max_tokens, and each prompt's category's system prompt
    (``categories``: prompt id → category; ``default_category``: the category of prompts
    without one, and of the judge's own calls outside the prompts, the probes).

    A template that needs a reference answer (``{REFERENCE}``) or settings that name
    reference models are refused: ``auto`` does not give its judges one."""
    if settings.reference or "{REFERENCE}" in settings.template:
        raise InputError(
            f"{settings.source}: reference answers (reference: {list(settings.reference)}, "
            "{REFERENCE} in the template) are not given to auto's judges; set reference: null "
            "and take {REFERENCE} out of the template."
        )
    ours = settings.ours()
    prompts = {}
    for pid, cat in (categories or {}).items():
        prompts[pid] = settings.category(cat or default_category or "").system_prompt
    system = ours["system_prompt"]
    if default_category is not None:
        system = settings.category(default_category).system_prompt
    params = {**dict(judge.endpoint.params), **ours["params"]}
    endpoint = replace(judge.endpoint, params=params, system_prompt=system)
    return replace(
        judge,
        endpoint=endpoint,
        template=ours["template"],
        parser=settings.parser(),
        system_prompts=prompts,
    )


_V01_FIELDS = (
    ("{question_1}", "{QUESTION}"),
    ("{answer_1}", "{ANSWER_A}"),
    ("{answer_2}", "{ANSWER_B}"),
    ("{ref_answer_1}", "{REFERENCE}"),
)


def _setting_type(
    path: Path, key: str, value: Any, kind: type, said: str, item: type | None = None
) -> None:
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if ok and item is not None:
        ok = all(isinstance(v, item) and not isinstance(v, bool) for v in value)
    if not ok:
        raise InputError(f"{path}: {key} must be {said}, not {_shown(value)}.")


def _yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    """A YAML file that must be a mapping, read safely; errors name the file."""
    import yaml

    text = read_input_text(path, what)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: cannot read the {what} ({exc}).") from None
    except RecursionError:
        raise InputError(f"{path}: the {what} nest too deeply to be read.") from None
    check_depth(data, str(path))
    if not isinstance(data, dict):
        raise InputError(f"{path}: the {what} must be a YAML mapping.")
    return data


def _categories_of(path: Path, data: Mapping[str, Any]) -> dict[str, CategorySettings]:
    table = data.get("judge_settings")
    if table is None:
        if data.get("baseline_model") or data.get("system_prompt"):  # v0.1: one for all
            bench = str(data.get("bench_name") or "arena-hard-v0.1")
            base = CATEGORIES.get(bench, CATEGORIES["arena-hard-v0.1"])
            one = CategorySettings(
                str(data.get("baseline_model") or base.baseline),
                str(data.get("system_prompt") or base.system_prompt),
            )
            return {bench: one, **{k: one for k in CATEGORIES}}
        return dict(CATEGORIES)
    if not isinstance(table, dict) or not table:
        raise InputError(
            f"{path}: judge_settings must map each category to {{baseline, system_prompt}}, "
            f"not {_shown(table)}."
        )
    out = {}
    for cat, entry in table.items():
        where = f"judge_settings.{cat}"
        if not isinstance(entry, dict):
            raise InputError(f"{path}: {where} must be {{baseline, system_prompt}}.")
        for key in ("baseline", "system_prompt"):
            if not isinstance(entry.get(key), str) or not entry[key]:
                raise InputError(f"{path}: {where}.{key} must be a non-empty string.")
        out[str(cat)] = CategorySettings(entry["baseline"], entry["system_prompt"])
    return out


def _references(path: Path, data: Mapping[str, Any]) -> tuple[str, ...]:
    ref = data.get("reference")
    if ref in (None, False):
        return ()
    if ref is True:  # v0.1: the models are in ref_model
        ref = data.get("ref_model")
        if not ref:
            raise InputError(f"{path}: reference: true needs ref_model: [MODEL…].")
    if isinstance(ref, str):
        ref = [ref]
    _setting_type(path, "reference", ref, list, "a list of model names or null", str)
    return tuple(ref)


def read_judge_settings(path: str | Path) -> JudgeSettings:
    """Arena-Hard-Auto judge settings from its YAML file (:class:`JudgeSettings`)."""
    path = Path(path)
    data = _yaml_mapping(path, "judge settings")
    missing = [k for k in ("judge_model", "prompt_template") if not data.get(k)]
    if missing:
        raise InputError(f"{path}: judge settings need {', '.join(missing)}.")
    v01 = data.get("regex_patterns") is None and data.get("regex_pattern") is not None
    patterns = data.get("regex_patterns") or data.get("regex_pattern") or list(DEFAULT_PATTERNS)
    if isinstance(patterns, str):
        patterns = [patterns]
    _setting_type(path, "regex_patterns", patterns, list, "a list of regexes", str)
    _setting_type(path, "judge_model", data["judge_model"], str, "a model's name")
    _setting_type(path, "model_list", data.get("model_list") or [], list, "a list of names", str)
    for key in ("baseline_model", "system_prompt", "bench_name"):
        if data.get(key) is not None:
            _setting_type(path, key, data[key], str, "a string")
    for key in ("temperature", "max_tokens"):
        if isinstance(data.get(key), bool):
            raise InputError(f"{path}: {key} must be a number, not {data[key]!r}.")
    if not isinstance(data["prompt_template"], (str, list)) or (
        isinstance(data["prompt_template"], list)
        and not all(isinstance(t, str) for t in data["prompt_template"])
    ):
        raise InputError(
            f"{path}: prompt_template must be a template (a string), not "
            f"{_shown(data['prompt_template'])}."
        )
    for p in patterns:
        try:
            if re.compile(p).groups < 1:
                raise InputError(f"{path}: regex pattern {p!r} needs a (group) for the label.")
        except re.error as exc:
            raise InputError(f"{path}: regex pattern {p!r} is not a regex ({exc}).") from None
    template = data["prompt_template"]
    if isinstance(template, list):
        if len(template) != 1:
            raise InputError(
                f"{path}: prompt_template must be one template (multi-turn is not read)."
            )
        template = template[0]
    for old, new in _V01_FIELDS:
        template = str(template).replace(old, new)
    if "{ANSWER_A}" not in template or "{ANSWER_B}" not in template:
        raise InputError(f"{path}: prompt_template needs {{ANSWER_A}} and {{ANSWER_B}}.")
    try:
        temperature = float(data.get("temperature", 0.0))
        max_tokens = int(data.get("max_tokens", 4096))
    except (TypeError, ValueError):
        raise InputError(f"{path}: temperature and max_tokens must be numbers.") from None
    if not math.isfinite(temperature) or temperature < 0 or max_tokens < 1:
        raise InputError(f"{path}: temperature must be >= 0 and max_tokens >= 1.")
    return JudgeSettings(
        judge_model=str(data["judge_model"]),
        bench_name=str(data.get("bench_name") or ""),
        temperature=temperature,
        max_tokens=max_tokens,
        patterns=tuple(str(p) for p in patterns),
        template=template,
        model_list=tuple(str(m) for m in data.get("model_list") or ()),
        baseline=data.get("baseline_model"),
        system_prompt=data.get("system_prompt"),
        record=data,
        categories=_categories_of(path, data),
        reference=_references(path, data),
        rule="v0.1" if v01 else "v2",
        source=str(path),
    )


def write_judge_settings(settings: JudgeSettings, path: str | Path) -> None:
    """Write judge settings as YAML (the record read, or the v2 keys of new settings)."""
    import yaml

    data = dict(settings.record) or {
        "judge_model": settings.judge_model,
        "temperature": settings.temperature,
        "max_tokens": settings.max_tokens,
        "bench_name": settings.bench_name,
        "reference": None,
        "regex_patterns": list(settings.patterns),
        "prompt_template": settings.template,
        "model_list": list(settings.model_list),
    }
    Path(path).write_text(
        yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**9), encoding="utf-8"
    )


# ---------------------------------------------------------------------------------- endpoints
#: The ``api_type`` values whose calls are OpenAI's chat completions (its ``utils/completion.py``).
_OPENAI_TYPES = ("openai", "openai_thinking")


def read_endpoints(path: str | Path) -> dict[str, dict[str, Any]]:
    """Arena-Hard-Auto's endpoint file (``config/api_config.yaml``): each model's entry by
    its name (:func:`endpoint_from_settings` makes one an endpoint)."""
    path = Path(path)
    data = _yaml_mapping(path, "endpoint settings")
    for name, entry in data.items():
        if not isinstance(entry, dict):
            raise InputError(f"{path}: {name} must be a mapping of settings (model, endpoints…).")
    return {str(k): v for k, v in data.items()}


def endpoint_from_settings(
    entries: Mapping[str, Mapping[str, Any]],
    name: str,
    where: str,
    *,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> Any:
    """Model ``name``'s entry of an endpoint file as our
    :class:`~stablearena.judging.endpoints.config.ModelEndpoint`, read as its ``utils/completion.py``
    reads it: ``model`` (v0.1 ``model_name``; an endpoint's ``model_name`` overrides it);
    ``endpoints``: ``null`` (OpenAI's API: ``OPENAI_BASE_URL`` or api.openai.com, the key in
    ``OPENAI_API_KEY``) or a list whose first entry gives ``api_base`` and the key; ``parallel``
    (calls at once), ``temperature``, ``max_tokens``, ``reasoning_effort``, and ``sys_prompt``
    (v0.1 ``system_prompt``). ``temperature``/``max_tokens`` given here (a judge's settings)
    override the entry's, as its ``gen_judgment.py`` does.

    A key is never read from a file: an endpoint's ``api_key`` must be ``-`` (none) or name an
    environment variable (``$NAME``), or the entry gives ``api_key_env: NAME``. Errors name
    the file (``where``), the entry and the field."""
    from .endpoints.config import ModelEndpoint

    if name not in entries:
        raise InputError(
            f"{where}: no entry {name!r}; the file has {sorted(entries)[:20]}: add one "
            "(model, endpoints, api_type)."
        )
    e = entries[name]
    here = f"{where}: {name}"
    api_type = e.get("api_type", "openai")
    if api_type not in _OPENAI_TYPES:
        raise InputError(
            f"{here}.api_type is {api_type!r}: only OpenAI-compatible chat endpoints "
            f"({', '.join(_OPENAI_TYPES)}) are called; serve the model behind one (vLLM, "
            "SGLang, a gateway) and give its endpoints: [{api_base: …}]."
        )
    model = e.get("model", e.get("model_name", name))
    eps = e.get("endpoints")
    env = e.get("api_key_env")
    if eps is None:
        import os

        base = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
        env = env or "OPENAI_API_KEY"
    else:
        if not isinstance(eps, list) or not eps or not isinstance(eps[0], dict):
            raise InputError(f"{here}.endpoints must be null or a list of {{api_base, api_key}}.")
        first = eps[0]
        base = first.get("api_base")
        if not isinstance(base, str) or not base.startswith(("http://", "https://")):
            raise InputError(
                f"{here}.endpoints[0].api_base must be the server's URL (http://…/v1), "
                f"not {_shown(base)}."
            )
        model = first.get("model_name", model)
        key = first.get("api_key")
        if isinstance(key, str) and key.startswith("$"):
            env = key.strip("${}")
        elif key not in (None, "", "-") and env is None:
            raise InputError(
                f"{here}.endpoints[0].api_key: a key is never read from a file; put it in an "
                "environment variable and write api_key: $NAME (or api_key_env: NAME)."
            )
    if not isinstance(model, str) or not model:
        raise InputError(f"{here}.model must be the model's name on its server.")
    params: dict[str, Any] = {}
    for key, value in (("temperature", e.get("temperature")), ("max_tokens", e.get("max_tokens"))):
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{here}.{key} must be a number, not {_shown(value)}.")
            params[key] = value
    if temperature is not None:
        params["temperature"] = temperature
    if max_tokens is not None:
        params["max_tokens"] = max_tokens
    if api_type == "openai_thinking":
        params.pop("temperature", None)
        params["reasoning_effort"] = e.get("reasoning_effort", "medium")
    parallel = e.get("parallel", 4)
    if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
        raise InputError(f"{here}.parallel must be a whole number >= 1, not {_shown(parallel)}.")
    system = e.get("sys_prompt", e.get("system_prompt"))
    if system is not None and not isinstance(system, str):
        raise InputError(f"{here}.sys_prompt must be a string.")
    try:
        return ModelEndpoint(
            name,
            base,
            model,
            api_key_env=env,
            params=params,
            system_prompt=system,
            max_concurrency=min(parallel, 1024),
        )
    except InputError as exc:
        raise InputError(f"{here}: {exc}") from None


def read_generation_settings(path: str | Path) -> tuple[str, tuple[str, ...], dict[str, Any]]:
    """Arena-Hard-Auto's generation settings (``config/gen_answer_config.yaml``):
    (``bench_name``, ``model_list``, the defaults it gives every model: v0.1's
    ``temperature`` and ``max_tokens``)."""
    path = Path(path)
    data = _yaml_mapping(path, "generation settings")
    models = data.get("model_list")
    if not models:
        raise InputError(f"{path}: model_list must list the models to answer.")
    _setting_type(path, "model_list", models, list, "a list of model names", str)
    defaults = {}
    for key in ("temperature", "max_tokens"):
        value = data.get(key)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise InputError(f"{path}: {key} must be a number, not {_shown(value)}.")
            defaults[key] = value
    return str(data.get("bench_name") or ""), tuple(models), defaults


# ---------------------------------------------------------------------------------- a run
@dataclass
class ArenaHardRun:
    """A benchmark directory (``data/<bench_name>``): questions, answers by model, judgments
    by judge."""

    questions: list[Question]
    answers: dict[str, list[AnswerRecord]]
    judgments: dict[str, list[Judgment]]

    def battles(
        self,
        *,
        weight: int = 3,
        judges: Sequence[str] | None = None,
        style: bool = True,
        category: str | None = None,
    ) -> tuple[Battles, int]:
        """(the judgments as battles, judgments left out because a game has no verdict);
        :func:`judgment_battles`, with the answers' style when the run has answers and
        ``style``; only ``category``'s judgments when given (v2 runs have a baseline per
        category). An unknown judge name or category is an error."""
        unknown = sorted(set(judges or ()) - set(self.judgments))
        if unknown:
            raise InputError(
                f"no judgments of {unknown}; the run has judges {sorted(self.judgments)}."
            )
        chosen = [
            j for name, js in self.judgments.items() if judges is None or name in judges for j in js
        ]
        if category is not None:
            cats = sorted({j.category for j in chosen})
            chosen = [j for j in chosen if j.category == category]
            if not chosen:
                raise InputError(f"no judgments of category {category!r}; the run has {cats}.")
        answers = self.answers if style and self.answers else None
        return judgment_battles(chosen, weight=weight, answers=answers)

    def chosen(
        self, judges: Sequence[str] | None = None, category: str | None = None
    ) -> list[Judgment]:
        """The judgments of ``judges`` (default all) in ``category`` (default all)."""
        return [
            j
            for name, js in self.judgments.items()
            if judges is None or name in judges
            for j in js
            if category is None or j.category == category
        ]


def _run_files(directory: Path, min_depth: int = 1) -> list[Path]:
    """The ``*.jsonl`` files under ``directory`` and its subdirectories (``min_depth``: how
    many levels down at least; links to directories are not followed), sorted."""
    if not directory.is_dir():
        return []
    found = []
    for top, dirs, files in os.walk(directory):
        dirs.sort()
        depth = len(Path(top).relative_to(directory).parts) + 1
        if depth >= min_depth:
            found += [Path(top) / f for f in files if f.endswith(".jsonl")]
    return sorted(found)


def read_run(directory: str | Path, *, baseline: str | None = None) -> ArenaHardRun:
    """Read ``question.jsonl``, ``model_answer/**/*.jsonl`` and
    ``model_judgment/<judge>/**/*.jsonl`` of a benchmark directory (``baseline`` fills v0.1
    judgments, which name none). Subdirectories are read: a name with ``/`` is one
    (:func:`name_path`). Each record's model and judge are the names in the record; the
    answers of one model in two files, and a judgment repeated (in one file or two), are
    errors naming both places."""
    d = Path(directory)
    qfile = d / "question.jsonl"
    if not qfile.exists():
        raise InputError(
            f"{d}: no question.jsonl; give Arena-Hard-Auto's data/<bench_name> directory."
        )
    questions = read_questions(qfile)
    answers: dict[str, list[AnswerRecord]] = {}
    files: dict[str, Path] = {}
    for f in _run_files(d / "model_answer"):
        got = read_answers(f)
        if not got:
            continue
        model = got[0].model
        if model in answers:
            raise InputError(
                f"{f}: answers of model {model!r}, whose answers are in {files[model]} too; "
                "keep one file a model (merge them or remove one)."
            )
        answers[model], files[model] = got, f
    root = d / "model_judgment"
    judgments: dict[str, list[Judgment]] = {}
    for f in _run_files(root, min_depth=2):
        for j in read_judgments(f, baseline=baseline, root=root):
            judgments.setdefault(j.judge, []).append(j)
    _no_repeats(j for js in judgments.values() for j in js)
    return ArenaHardRun(questions, answers, judgments)


def check_run_names(directory: str | Path, models: Iterable[str], judges: Iterable[str]) -> None:
    """Raise the :class:`InputError` :func:`write_run` would for a run of ``models`` judged
    by ``judges`` in ``directory`` (a name that cannot name a file there, two names that
    would be one file), before any work is done (``auto --arena-hard-dir``)."""
    models = list(models)
    _plan(
        Path(directory),
        [(m, []) for m in models],
        [(j, m, []) for j in judges for m in models],
    )


def _plan(
    d: Path,
    answers: Iterable[tuple[str, list[Any]]],
    judgments: Iterable[tuple[str, str, list[Any]]],
) -> list[tuple[Path, str, list[Any]]]:
    """Each file of a run: (path by :func:`name_path`, what it holds, its items); two files
    at one path, or one inside the other's place, are an :class:`InputError`."""
    plan: list[tuple[Path, str, list[Any]]] = []
    for model, items in answers:
        path = name_path(d / "model_answer", model_file_name(model), within=d)
        plan.append((path, f"the answers of {model!r}", items))
    judge_dirs: dict[str, Path] = {}
    for judge, model, items in judgments:
        if judge not in judge_dirs:
            judge_dirs[judge] = name_path(d / "model_judgment", judge, suffix="", within=d)
        path = name_path(judge_dirs[judge], model_file_name(model), within=d)
        plan.append((path, f"the judgments by {judge!r} of {model!r}", items))
    taken: dict[str, str] = {}
    for path, what, _ in plan:
        key = os.path.normpath(path)
        if key in taken:
            raise InputError(f"{path}: {what} and {taken[key]} would be one file; rename one.")
        taken[key] = what
    for path, what, _ in plan:  # a file where another one's directory goes
        for parent in path.parents:
            if os.path.normpath(parent) in taken:
                raise InputError(
                    f"{path}: {what} would be inside the file of "
                    f"{taken[os.path.normpath(parent)]}; rename one."
                )
    return plan


def write_run(run: ArenaHardRun, directory: str | Path) -> None:
    """Write a run in Arena-Hard-Auto's layout (the inverse of :func:`read_run`): each model's
    and judge's file named by :func:`name_path`, inside ``directory``. Two names that would be
    one file (a judge ``a`` with a model ``b/m`` and a judge ``a/b`` with a model ``m``, or
    names differing only in case on a file system that ignores case) are an error naming
    both, as is a file of the run that is a link out of ``directory``."""
    d = Path(directory)
    by_judge: list[tuple[str, str, list[Any]]] = []
    for judge, judgments in run.judgments.items():
        by_model: dict[str, list[Judgment]] = {}
        for j in judgments:
            by_model.setdefault(j.model, []).append(j)
        by_judge += [(judge, model, js) for model, js in by_model.items()]
    plan = [(name_path(d, "question", within=d), "the questions", list(run.questions))]
    plan += _plan(d, run.answers.items(), by_judge)
    written: dict[tuple[int, int], str] = {}
    for path, what, items in plan:
        if path.exists():  # a file written a moment ago under another spelling: one file
            st = path.stat()
            if (st.st_dev, st.st_ino) in written:
                raise InputError(
                    f"{path}: {what} and {written[st.st_dev, st.st_ino]} would be one file on "
                    "this file system (it ignores case or normalises names); rename one."
                )
        _write_jsonl(items, path)
        st = path.stat()
        written[st.st_dev, st.st_ino] = what


# ---------------------------------------------------------------------------------- battles
def judgment_battles(
    judgments: Sequence[Judgment],
    *,
    weight: int = 3,
    answers: Mapping[str, Sequence[AnswerRecord]] | None = None,
) -> tuple[Battles, int]:
    """Judgments as battles, two per judgment (one per game, ``model_a`` the answer shown as
    A), the judge as annotator and the question uid as prompt; a strong verdict (``>>``)
    weighs ``weight``. With ``answers``, the battles carry the four style covariates
    (length, headers, lists, bold: (a − b)/(a + b + 1) of the answers' metadata, or of counts
    of their text when they have none) for the style-controlled raters.

    Returns the battles and how many judgments were left out because a game had no verdict
    (Arena-Hard-Auto leaves them out too, and says how many). A baseline judged against
    itself (v2's ``creative_writing`` baseline among the models judged) is no battle between
    two models and is left out here; :func:`self_judged_row` gives the row
    ``show_result.py`` prints for it."""
    if weight < 1:
        raise InputError("the weight of a strong verdict must be >= 1.")
    a_names: list[str] = []
    b_names: list[str] = []
    outcome: list[int] = []
    w: list[float] = []
    judge: list[str] = []
    prompt: list[str] = []
    wheres: list[str] = []
    skipped = 0
    for j in judgments:
        if j.labels[0] is None or j.labels[1] is None:
            skipped += 1
            continue
        if j.model == j.baseline:
            continue  # self_judged_row
        for (first, second), lab in zip(
            ((j.baseline, j.model), (j.model, j.baseline)), j.labels, strict=True
        ):
            s, strong = label_score(lab, j.where)
            a_names.append(first)
            b_names.append(second)
            outcome.append(int(Outcome.A if s == 1.0 else Outcome.B if s == 0.0 else Outcome.TIE))
            w.append(float(weight) if strong else 1.0)
            judge.append(j.judge)
            prompt.append(j.uid)
            wheres.append(j.where)
    if not outcome:
        raise InputError("no judgment with both games' verdicts to rate.")
    battles = Battles.from_arrays(
        np.array(a_names, dtype=object),
        np.array(b_names, dtype=object),
        np.array(outcome, dtype=np.int8),
        annotator=judge,
        prompt=prompt,
        weight=w,
        source="arena-hard judgments",
    )
    if answers is not None:
        table = {(a.model, a.uid): a for rows in answers.values() for a in rows}
        sides = np.zeros((2, len(outcome), 4))
        for k, (names, where) in enumerate(
            zip(zip(a_names, b_names, strict=True), wheres, strict=True)
        ):
            for s, model in enumerate(names):
                ans = table.get((model, prompt[k]))
                if ans is None:
                    raise InputError(
                        f"{where}: no answer of {model!r} to question {prompt[k]!r} for its style; "
                        f"add model_answer/{model}.jsonl or rate without style control."
                    )
                sides[s, k] = _style_vector(
                    ans.metadata, ans.text, f"the answer of {model!r} to {prompt[k]!r}"
                )

        battles = replace(
            battles,
            covariates=normalized_difference(sides[0], sides[1]),
            covariate_names=STYLE_FEATURES,
            extra={"style_a": sides[0], "style_b": sides[1]},
        )
    return battles, skipped


def self_judged_row(
    judgments: Sequence[Judgment],
    *,
    weight: int = 3,
    rounds: int = 100,
    level: float = 0.90,
    seed: int = 0,
) -> dict[str, Any] | None:
    """The baseline judged against itself, as Arena-Hard-Auto's plain ``show_result.py``
    prints it: its games are a model's like any other (game 2's label for A, 1 − game 1's,
    a strong verdict ``weight`` times), so the baseline gets a measured row — the judge's
    position bias on identical answers — besides its fixed 50 %. ``None`` when no judgment
    is of a model against itself. Returns ``{"model", "judgments", "score", "lower",
    "upper"}`` in percent (mean of the bootstrap rounds, their ``level`` quantiles)."""
    own = [j for j in judgments if j.model == j.baseline and None not in j.labels]
    if not own:
        return None
    scores: list[float] = []
    for j in own:
        s1, strong1 = label_score(j.labels[0], j.where)
        s2, strong2 = label_score(j.labels[1], j.where)
        scores += [s2] * (weight if strong2 else 1) + [1.0 - s1] * (weight if strong1 else 1)
    x = np.array(scores)
    rng = np.random.default_rng(seed)
    boot = np.array([x[rng.integers(0, len(x), len(x))].mean() for _ in range(rounds)])
    lo, hi = np.quantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return {
        "model": own[0].model,
        "judgments": len(own),
        "score": round(float(boot.mean()) * 100, 1),
        "lower": round(float(lo) * 100, 1),
        "upper": round(float(hi) * 100, 1),
    }


# ---------------------------------------------------------------------------------- scores
@dataclass(frozen=True)
class BaselineBoard:
    """Arena-Hard-Auto's score table: each model's score against the baseline (a fraction in
    [0, 1]; the baseline itself 0.5), its bootstrap interval and the bootstrap replicates
    (rounds × models) the benchmark metrics need."""

    models: tuple[str, ...]
    score: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    samples: np.ndarray
    baseline: str
    style: bool
    level: float
    features: tuple[str, ...] = ()

    def records(self) -> list[dict[str, Any]]:
        """One row a model, best first, in percent (one decimal, as Arena-Hard-Auto prints)."""
        order = np.argsort(-self.score, kind="stable")
        return [
            {
                "model": self.models[k],
                "score": round(float(self.score[k]) * 100, 1),
                "lower": round(float(self.lower[k]) * 100, 1),
                "upper": round(float(self.upper[k]) * 100, 1),
            }
            for k in order
        ]


def _model_side(battles: Battles, base: int) -> tuple[np.ndarray, np.ndarray]:
    """Per battle: the non-baseline model's code and its score (1, ½, 0)."""
    a_is_base = battles.model_a == base
    if not np.all(a_is_base | (battles.model_b == base)):
        row = int(np.flatnonzero(~(a_is_base | (battles.model_b == base)))[0])
        raise InputError(
            f"{battles.source}: battle {row + 1} does not involve the baseline "
            f"{battles.models[base]!r}; the baseline table needs every battle against it."
        )
    model = np.where(a_is_base, battles.model_b, battles.model_a)
    s_a = np.select(
        [battles.outcome == Outcome.A, battles.outcome == Outcome.B], [1.0, 0.0], default=0.5
    )
    return model, np.where(a_is_base, 1.0 - s_a, s_a)


def _expand(battles: Battles) -> Battles:
    """Integer weights as repeated rows (a strong verdict is ``weight`` games, as
    Arena-Hard-Auto's bootstrap draws them)."""
    w = battles.weights()
    reps = np.rint(w).astype(np.int64)
    if not np.allclose(reps, w):
        raise InputError(f"{battles.source}: the baseline table needs whole-number weights.")

    return replace(battles.take(np.repeat(np.arange(len(battles)), reps)), weight=None)


def _arena_hard_style(games: Battles, base: int) -> tuple[Battles, np.ndarray]:
    """The games oriented model-first and Arena-Hard-Auto v2's style covariates of them
    (:func:`baseline_board`, ``convention="arena-hard"``)."""
    extra = games.extra or {}
    if "style_a" not in extra or "style_b" not in extra:
        raise InputError(
            f"{games.source}: the Arena-Hard convention needs each side's style counts "
            "(battles from judgment_battles with answers)."
        )
    flip = games.model_a == base
    sa = np.where(flip[:, None], extra["style_b"], extra["style_a"])
    sb = np.where(flip[:, None], extra["style_a"], extra["style_b"])
    outcome = games.outcome.copy()
    outcome[flip & (games.outcome == Outcome.A)] = Outcome.B
    outcome[flip & (games.outcome == Outcome.B)] = Outcome.A
    oriented = replace(
        games,
        model_a=np.where(flip, games.model_b, games.model_a).astype(np.int32),
        model_b=np.where(flip, games.model_a, games.model_b).astype(np.int32),
        outcome=outcome,
    )
    length = (sa[:, 0] - sb[:, 0]) / np.maximum(sa[:, 0] + sb[:, 0], 1e-300)
    da = sa[:, 1:] / (sa[:, :1] + 1)
    db = sb[:, 1:] / (sb[:, :1] + 1)
    z = np.column_stack([length, (da - db) / (da + db + 1)])
    sd = z.std(axis=0, ddof=1) if len(z) > 1 else np.zeros(z.shape[1])
    z = np.where(sd > 0, (z - z.mean(axis=0)) / np.where(sd > 0, sd, 1.0), 0.0)
    return oriented, z


def baseline_board(
    battles: Battles,
    baseline: str,
    *,
    style: bool = False,
    convention: str = "ours",
    rounds: int = 100,
    level: float = 0.90,
    seed: int = 0,
) -> BaselineBoard:
    """Arena-Hard-Auto's baseline-anchored table of ``battles`` (every battle against
    ``baseline``; :func:`judgment_battles`).

    Plain (``style=False``): a model's score is its mean score over its games, each
    bootstrap round resampling every model's games with replacement; the reported score is
    the mean of the rounds. Style-controlled: each round resamples all games and fits
    Bradley–Terry with the battles' style covariates (our ``style-m-elo`` rater: ties as half a win, as Arena-Hard-Auto counts them), the score
    being the model's win probability against the baseline, σ(θ_model − θ_baseline); the
    reported score is the median of the rounds; covariates constant over all battles (an
    answer set without any bold text) are left out and ``features`` names those used. The
    interval: the rounds' quantiles (1 − level)/2 and (1 + level)/2 (Arena-Hard-Auto: 5 % and
    95 %).

    ``convention`` (style-controlled only): ``"ours"`` — the four covariates
    (a − b)/(a + b + 1) of the games as shown, standardised without centring (the games are
    shown both ways round, so a covariate's mean is near 0), and the score is the win
    probability at equal style; ``"arena-hard"`` — Arena-Hard-Auto v2's ``show_result.py``:
    every game oriented model-first, length as (a − b)/(a + b), markdown as densities
    (count / (tokens + 1)) with (a − b)/(a + b + 1), each covariate centred and scaled over
    the games, no penalty; its score is the win probability at the games' mean style
    difference, so a set of models that write longer than the baseline all read higher."""
    if baseline not in battles.models:
        raise InputError(f"{battles.source}: the baseline {baseline!r} is not among the models.")
    if rounds < 2 or not 0 < level < 1:
        raise InputError("rounds must be >= 2 and level in (0, 1).")
    games = _expand(battles)
    base = games.models.index(baseline)
    model, s = _model_side(games, base)
    m = len(games.models)
    rng = np.random.default_rng(seed)
    samples = np.full((rounds, m), 0.5)
    features: tuple[str, ...] = ()
    if not style:
        groups = [np.flatnonzero(model == k) for k in range(m)]
        for r in range(rounds):
            for k, rows in enumerate(groups):
                if k != base and len(rows):
                    samples[r, k] = s[rng.choice(rows, size=len(rows))].mean()
        score = samples.mean(axis=0)
    else:
        if games.covariates is None:
            raise InputError(
                f"{battles.source}: style control needs the answers' style (read the run with "
                "its model_answer files)."
            )
        from ..raters import get_rater

        if convention not in ("ours", "arena-hard"):
            raise InputError(f"convention must be ours or arena-hard, not {convention!r}.")
        penalty: dict[str, Any] = {}
        if convention == "arena-hard":
            games, z_ah = _arena_hard_style(games, base)
            games = replace(games, covariates=z_ah)
            penalty = {"penalty": "none", "standardize": False}
        z = np.asarray(games.covariates)
        varying = [n for c, n in enumerate(games.covariate_names or ()) if np.ptp(z[:, c]) > 0]
        if not varying:
            raise InputError(
                f"{battles.source}: every style covariate is the same in every battle; there is "
                "no style to control."
            )
        features = tuple(varying)
        raters: dict[tuple[str, ...], Any] = {}
        cols = [list(games.covariate_names or ()).index(f) for f in features]
        n = len(games)
        for r in range(rounds):
            sub = games.take(rng.integers(0, n, size=n))
            # a covariate that varies over the games may not in one resample: left out there
            zs = np.asarray(sub.covariates)
            used = tuple(f for f, c in zip(features, cols, strict=True) if np.ptp(zs[:, c]) > 0)
            if used not in raters:
                raters[used] = (
                    get_rater("style-m-elo", raw=False, features=used, **penalty)
                    if used
                    else get_rater("m-elo")
                )
            fit = raters[used].fit(sub)
            idx = [fit.models.index(x) for x in games.models]
            th = np.asarray(fit.scores)[idx]
            samples[r] = 1.0 / (1.0 + np.exp(-(th - th[base])))
        score = np.median(samples, axis=0)
    lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2], axis=0)
    keep = np.array([k == base or np.any(model == k) for k in range(m)])
    pick = np.flatnonzero(keep)
    return BaselineBoard(
        tuple(games.models[k] for k in pick),
        score[pick],
        lo[pick],
        hi[pick],
        samples[:, pick],
        baseline,
        style,
        level,
        features,
    )


# ---------------------------------------------------------------------------------- export
_AH_WINNER = {"A": "A>B", "B": "B>A", "tie": "A=B"}


def _ans_id(*key: str) -> str:
    return hashlib.blake2b("\x1f".join(key).encode(), digest_size=11).hexdigest()


def export_journal(
    records: Sequence[Mapping[str, Any]],
    prompts: Sequence[Any],
    directory: str | Path,
    *,
    baseline: str,
    patterns: Sequence[str] = DEFAULT_PATTERNS,
    category: str = "hard_prompt",
    categories: Mapping[str, str] | None = None,
    parser: Any = None,
) -> dict[str, int]:
    """Write an automatic run (its journal's records, :class:`~stablearena.judging.auto_arena.AutoArena`)
    in Arena-Hard-Auto's layout under ``directory``: ``question.jsonl`` (v2), one answer file
    per model, one judgment file per judge and model against ``baseline`` (each model's file
    named by :func:`model_file_name`).

    Each question and judgment carries its prompt's category (``categories``: prompt id →
    category, e.g. read from an Arena-Hard-Auto ``question.jsonl``); a prompt without one is
    of ``category`` (default v2's ``hard_prompt``; ``show_result.py -c CATEGORY`` reads the
    judgments of one category, against the baseline its settings give that category).

    A game's label is the one the judge's ``parser`` reads in its reply (a
    :class:`~stablearena.judging.judges.VerdictParser` from :meth:`JudgeSettings.parser`; default
    Arena-Hard-Auto v2's rule over ``patterns``), or, when the judge answered in our labels
    (``[[A]]``, ``[[B]]``, ``[[C]]``), ``A>B``/``B>A``/``A=B``. Returns the counts written and
    ``not_baseline``: judgements of two models neither of which is the baseline (they have no
    place in these files)."""
    d = Path(directory)
    texts = {p.id: p.text for p in prompts}
    cats = {p.id: (categories or {}).get(p.id) or category for p in prompts}
    questions = [
        Question(p.id, p.text, cats[p.id], {"uid": p.id, "category": cats[p.id], "prompt": p.text})
        for p in prompts
    ]

    def label_of(text: str) -> str | None:
        return parser.label(text) if parser is not None else extract_label(text, patterns)

    answers: dict[str, list[AnswerRecord]] = {}
    for rec in records:
        if rec.get("type") != "answer" or not rec.get("ok"):
            continue
        pid, model, text = str(rec["prompt_id"]), str(rec["model"]), str(rec.get("text", ""))
        out = {
            "uid": pid,
            "ans_id": _ans_id(model, pid),
            "model": model,
            "messages": [
                {"role": "user", "content": texts.get(pid, "")},
                {"role": "assistant", "content": {"answer": text}},
            ],
            "tstamp": None,
            "metadata": answer_metadata(text),
        }
        answers.setdefault(model, []).append(AnswerRecord(pid, model, text, out["metadata"], out))
    judgments: dict[str, list[Judgment]] = {}
    not_baseline = unparsed = 0
    for rec in records:
        if rec.get("type") != "judgement" or rec.get("stage") == "answer":
            continue
        x, y = str(rec["x"]), str(rec["y"])
        if baseline not in (x, y):
            not_baseline += 1
            continue
        model = y if x == baseline else x
        by_order = {v.get("order"): v for v in rec.get("verdicts") or []}
        # game 1 shows the baseline as A: order "xy" when x is the baseline
        orders = ("xy", "yx") if x == baseline else ("yx", "xy")
        games: list[dict[str, Any] | None] = []
        labels: list[str | None] = []
        for o in orders:
            v = by_order.get(o)
            if v is None:
                games.append(None)
                labels.append(None)
                unparsed += 1
                continue
            label = label_of(str(v.get("reasoning", "")))
            if label not in LABELS:
                label = _AH_WINNER.get(str(v.get("winner")))
            unparsed += label is None
            games.append({"score": label, "judgment": {"answer": v.get("reasoning", "")}})
            labels.append(label)
        cat = cats.get(str(rec["prompt_id"]), category)
        out = {
            "uid": str(rec["prompt_id"]),
            "category": cat,
            "judge": str(rec["judge"]),
            "model": model,
            "baseline": baseline,
            "games": games,
        }
        judgments.setdefault(out["judge"], []).append(
            Judgment(out["uid"], model, baseline, out["judge"], cat, (labels[0], labels[1]), out)
        )
    write_run(ArenaHardRun(questions, answers, judgments), d)
    return {
        "questions": len(questions),
        "answers": sum(len(v) for v in answers.values()),
        "judgments": sum(len(v) for v in judgments.values()),
        "not_baseline": not_baseline,
        "games_without_verdict": unparsed,
    }


# ---------------------------------------------------------------------------------- metrics
def read_board(path: str | Path) -> dict[str, tuple[float, float, float]]:
    """A reference board (e.g. a human arena's): CSV with ``model``, ``score`` and the interval
    as ``lower``/``upper`` or Arena-Hard-Auto's ``rating_q025``/``rating_q975``. Returns
    model → (score, lower, upper)."""
    import csv

    path = Path(path)
    text = read_input_text(path, "reference board")
    try:
        rows = list(csv.DictReader(text.splitlines()))
    except csv.Error as exc:
        raise InputError(f"{path}: cannot read the reference board ({exc}).") from exc
    cols = set(rows[0]) if rows else set()
    lo_col = "lower" if "lower" in cols else "rating_q025"
    hi_col = "upper" if "upper" in cols else "rating_q975"
    need = [c for c in ("model", "score", lo_col, hi_col) if c not in cols]
    if need:
        raise InputError(
            f"{path}: a reference board needs columns model, score, lower, upper (or "
            f"rating_q025, rating_q975); missing {need}."
        )
    out: dict[str, tuple[float, float, float]] = {}
    lines: dict[str, int] = {}
    for k, row in enumerate(rows, 2):
        try:
            vals = tuple(float(row[c]) for c in ("score", lo_col, hi_col))
        except (TypeError, ValueError):
            raise InputError(f"{path}, line {k}: score and interval must be numbers.") from None
        if not all(math.isfinite(v) for v in vals) or not vals[1] <= vals[2]:
            raise InputError(f"{path}, line {k}: the interval must be finite with lower <= upper.")
        if row["model"] in out:
            raise InputError(
                f"{path}, line {k}: model {row['model']!r} appears twice (first on line "
                f"{lines[row['model']]}); keep one row a model."
            )
        out[row["model"]] = vals  # type: ignore[assignment]
        lines[row["model"]] = k
    return out


def board_metrics(
    board: BaselineBoard, reference: Mapping[str, tuple[float, float, float]] | None = None
) -> dict[str, Any]:
    """Arena-Hard-Auto's benchmark metrics of a board (:func:`stablearena.analysis.metrics.benchmark_metrics`)
    on the models it shares with ``reference``; ``models_compared`` and ``not_in_reference``
    say which."""
    from ..analysis.metrics import benchmark_metrics

    if reference is None:
        return {
            "models_compared": len(board.models),
            **benchmark_metrics(board.score, board.lower, board.upper),
        }
    keep = [k for k, m in enumerate(board.models) if m in reference]
    missing = [m for m in board.models if m not in reference]
    if len(keep) < 2:
        raise InputError(
            f"the board and the reference share {len(keep)} model(s); they need two or more "
            f"(board: {list(board.models)})."
        )
    ref = np.array([reference[board.models[k]] for k in keep])
    got = benchmark_metrics(
        board.score[keep],
        board.lower[keep],
        board.upper[keep],
        board.samples[:, keep],
        (ref[:, 0], ref[:, 1], ref[:, 2]),
    )
    got = {k: round(v, 4) for k, v in got.items()}
    return {"models_compared": len(keep), "not_in_reference": missing, **got}


# ---------------------------------------------------------------------------------- simulation
def simulate_run(
    true_ratings: Sequence[float],
    n_questions: int,
    *,
    lengths: Sequence[float] | None = None,
    length_bias: float = 0.0,
    tie_prob: float = 0.1,
    strong_prob: float = 0.3,
    judge: str = "sim-judge",
    names: Sequence[str] | None = None,
    category: str = "sim",
    seed: int = 0,
) -> ArenaHardRun:
    """An Arena-Hard-Auto run of known truth: model ``k`` (named ``model_k``; ``model_0`` the
    baseline) has Elo-scale rating ``true_ratings[k]``; on each question each model is judged
    against the baseline in both orders. A game is a tie with ``tie_prob``, else the model
    wins with probability σ(C·(r_k − r_0) + ``length_bias``·d), d = (L_k − L_0)/(L_k + L_0)
    the answers' normalised length difference (a judge that likes long answers), and a
    verdict is strong with ``strong_prob``. Answer lengths: log-normal around ``lengths[k]``
    tokens (default 500 for all) and markdown counts (headers, list items, bold) Poisson of
    mean 1 each, unrelated to quality, written as answer metadata. ``names``: the models'
    names (default ``model_0``…); ``category``: the questions'."""
    from ..raters.base import ELO_SCALE

    r = np.asarray(true_ratings, dtype=float)
    m = len(r)
    if m < 2 or n_questions < 1:
        raise InputError("a simulated run needs two models or more and one question or more.")
    mean_len = np.full(m, 500.0) if lengths is None else np.asarray(lengths, dtype=float)
    rng = np.random.default_rng(seed)
    names = [f"model_{k}" for k in range(m)] if names is None else [str(n) for n in names]
    if len(names) != m or len(set(names)) != m:
        raise InputError("names must be distinct, one per rating.")
    uids = [f"q{q:04d}" for q in range(n_questions)]
    questions = [
        Question(
            u,
            f"question {u}",
            category,
            {"uid": u, "category": category, "prompt": f"question {u}"},
        )
        for u in uids
    ]
    length = np.maximum(1, np.rint(mean_len[:, None] * rng.lognormal(0, 0.3, (m, n_questions))))
    marks = rng.poisson(1.0, (m, n_questions, 3))
    answers: dict[str, list[AnswerRecord]] = {}
    for k, name in enumerate(names):
        rows = []
        for q, u in enumerate(uids):
            meta = {
                "token_len": int(length[k, q]),
                "header_count": {f"h{i}": int(marks[k, q, 0]) * (i == 2) for i in range(1, 7)},
                "list_count": {"ordered": 0, "unordered": int(marks[k, q, 1])},
                "bold_count": {"**": int(marks[k, q, 2]), "__": 0},
            }
            rec = {
                "uid": u,
                "ans_id": _ans_id(name, u),
                "model": name,
                "messages": [
                    {"role": "user", "content": f"question {u}"},
                    {"role": "assistant", "content": {"answer": f"answer of {name} to {u}"}},
                ],
                "tstamp": None,
                "metadata": meta,
            }
            rows.append(AnswerRecord(u, name, rec["messages"][1]["content"]["answer"], meta, rec))
        answers[name] = rows
    judgments = []
    for k in range(1, m):
        for q, u in enumerate(uids):
            d = (length[k, q] - length[0, q]) / (length[k, q] + length[0, q])
            p = 1.0 / (1.0 + math.exp(-(ELO_SCALE * (r[k] - r[0]) + length_bias * d)))
            labels = []
            for game in (0, 1):  # game 0: baseline shown as A
                u1, u2 = rng.random(), rng.random()
                if u1 < tie_prob:
                    labels.append("A=B")
                    continue
                model_wins = rng.random() < p
                a_wins = model_wins if game == 1 else not model_wins
                strong = u2 < strong_prob
                labels.append(
                    ("A>>B" if strong else "A>B") if a_wins else ("B>>A" if strong else "B>A")
                )
            rec = {
                "uid": u,
                "category": category,
                "judge": judge,
                "model": names[k],
                "baseline": names[0],
                "games": [{"score": lab, "judgment": {"answer": f"[[{lab}]]"}} for lab in labels],
            }
            judgments.append(
                Judgment(u, names[k], names[0], judge, category, (labels[0], labels[1]), rec)
            )
    return ArenaHardRun(questions, answers, {judge: judgments})


def fitted_metrics(
    fitted: Any,
    reference: Mapping[str, tuple[float, float, float]] | None = None,
    *,
    level: float = 0.90,
    draws: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """The benchmark metrics of any fitted board (an automatic run's am-ELO, whatever its
    design): its ``level`` Fisher intervals (R ± z·se, Elo points) for separability and
    agreement, and ``draws`` draws of the ratings from their normal approximation for the
    pair-rank Brier score. A reference board may be on any scale: only its intervals' order
    counts (and Spearman's ranks)."""
    from scipy.stats import norm

    from ..raters.uncertainty import covariance

    cov = covariance(fitted)
    r = np.asarray(fitted.ratings, dtype=float)
    z = float(norm.ppf((1 + level) / 2))
    se = cov.se
    rng = np.random.default_rng(seed)
    c = cov.ratings
    w, v = np.linalg.eigh((c + c.T) / 2)
    samples = r + rng.standard_normal((draws, len(r))) @ (v * np.sqrt(np.clip(w, 0, None))).T
    board = BaselineBoard(
        tuple(fitted.models), r, r - z * se, r + z * se, samples, "", False, level
    )
    return board_metrics(board, reference)
