"""Models as endpoints: their configuration, read from a TOML file's ``[[models]]`` tables.

A model is either an OpenAI-compatible chat-completions endpoint (:class:`ModelEndpoint`) or
answers read from a file keyed by prompt id (:class:`OfflineModel`). An endpoint's API key is
never stored: ``api_key_env`` names the environment variable that holds it, read at call time.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ...data.names import checked_name, clean_name
from ...errors import InputError

__all__ = [
    "NUMERIC_BOUNDS",
    "check_number",
    "ModelEndpoint",
    "OfflineModel",
    "Price",
    "load_toml",
    "models_from_toml",
    "read_models",
]


def load_toml(path: str | Path) -> dict[str, Any]:
    """A TOML file as a dictionary; a missing or malformed file is an :class:`InputError`."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - the backport, a dependency on Python 3.10
        import tomli as tomllib
    from ...inputs import check_depth, read_input_text

    text = read_input_text(path, "TOML")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: not valid TOML ({exc}); fix the file") from exc
    except RecursionError:
        raise InputError(f"{path}: the TOML nests too deeply to be a config file") from None
    check_depth(data, str(path))
    return data


@dataclass(frozen=True)
class Price:
    """Price per million tokens (prompt and completion), in any currency, for the cost column."""

    prompt: float = 0.0
    completion: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """``(prompt × prompt_tokens + completion × completion_tokens) / 10⁶``."""
        return (self.prompt * prompt_tokens + self.completion * completion_tokens) / 1e6


#: The allowed range of every numeric setting of an endpoint: ``field: (kind, low, high)``,
#: both ends included; ``int`` fields take whole numbers only, ``float`` ones any finite number
#: (admin routes, ``serve --config`` and models.toml: one check, in ``__post_init__``). A new
#: numeric field gets its line here.
NUMERIC_BOUNDS: dict[str, tuple[type, float, float]] = {
    "max_concurrency": (int, 1, 10_000),
    "timeout": (float, 0.01, 86_400.0),  # a day
    "max_retries": (int, 0, 100),
    "backoff": (float, 0.0, 3_600.0),
    "backoff_max": (float, 0.0, 3_600.0),
    "max_retry_after": (float, 0.0, 86_400.0),
    "outage_after": (int, 1, 1_000_000),
    "outage_cooldown": (float, 0.0, 86_400.0),
    "max_answer_chars": (int, 1, 1_000_000_000),
}
#: Prices per million tokens: finite, from 0 to this.
MAX_PRICE = 1e6


def check_number(value: object, kind: type, low: float, high: float, what: str) -> None:
    """An :class:`InputError` naming ``what``, ``value`` and the range unless ``value`` is a
    number of ``kind`` (``int``: whole; never a boolean) from ``low`` to ``high``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and kind is int:
        ok = isinstance(value, int)
    if ok:
        ok = math.isfinite(value) and low <= value <= high  # type: ignore[arg-type]
    if not ok:
        noun = "a whole number" if kind is int else "a number"
        raise InputError(f"{what} must be {noun} from {low:g} to {high:g}, not {value!r}")


def _one_name(value: object, where: str) -> str:
    """A name given in a config (an alias, an organisation), as :func:`clean_name` makes it."""
    if not isinstance(value, str):
        raise InputError(f"{where} must be a text, not {value!r}")
    try:
        return clean_name(value)
    except ValueError as exc:
        raise InputError(f"{where}: {exc} (got {value!r}); fix it") from None


def _aliases(value: object, where: str) -> tuple[str, ...]:
    """``aliases = ["…", …]`` as a tuple of clean names (an error names the bad one)."""
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise InputError(f'{where}: aliases must be a list of names, e.g. ["ChatGPT"]')
    return tuple(_one_name(v, f"{where}: aliases[{k}]") for k, v in enumerate(value))


@dataclass(frozen=True)
class ModelEndpoint:
    """An OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint.

    ``api_key_env`` is the NAME of the environment variable holding the key (``None``: no key);
    ``params`` go into the request body as they are (``temperature``, ``max_tokens``, …);
    ``timeout`` bounds one attempt at a whole answer, in seconds; ``max_answer_chars`` bounds
    an answer's length: a longer one is stopped there (the connection closed) and the call
    fails with ``too_long``.
    Retries: up to ``max_retries`` more attempts after a timeout, a dropped connection or HTTP
    408/409/429/500/502/503/504, waiting ``Retry-After`` when the server sends it (at most
    ``max_retry_after`` seconds), else ``min(backoff_max, backoff × 2^k)`` × a uniform jitter in
    [0.5, 1]. After ``outage_after`` consecutive failed calls the model is under outage: calls
    fail at once for ``outage_cooldown`` seconds, then one probe call is let through; an answer
    ends the outage.
    """

    name: str
    base_url: str
    model: str
    api_key_env: str | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None
    max_concurrency: int = 4
    timeout: float = 120.0
    stream: bool = True
    stream_usage: bool = True
    max_retries: int = 3
    backoff: float = 0.5
    backoff_max: float = 30.0
    max_retry_after: float = 60.0
    outage_after: int = 5
    outage_cooldown: float = 30.0
    price: Price | None = None
    #: the longest answer taken, in characters: past it the call stops (the connection is
    #: closed) and fails with reason ``too_long``
    max_answer_chars: int = 200_000
    #: the maker or model family (e.g. "openai"): a judge of the same family as a model it
    #: judges is reported (self-preference, docs/guides/models-and-judges.md)
    family: str | None = None
    #: other names the model goes by (e.g. "ChatGPT" for gpt-4o) and its maker (e.g.
    #: "OpenAI"): an arena answer that mentions any of them, or the model's name, makes the
    #: battle non-anonymous (stablearena.judging.anonymity, docs/guides/arena-page.md)
    aliases: tuple[str, ...] = ()
    organisation: str | None = None
    #: the model takes images (OpenAI-compatible ``image_url`` content parts): only such
    #: models are drawn for a battle with an attached image, and only such judges judge one
    vision: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        where = f"model {self.name!r}"
        object.__setattr__(self, "aliases", _aliases(self.aliases, where))
        if self.organisation is not None:
            object.__setattr__(
                self, "organisation", _one_name(self.organisation, f"{where}: organisation")
            )
        if not self.name or not isinstance(self.name, str):
            raise InputError("a model needs a non-empty 'name'")
        if not str(self.base_url).startswith(("http://", "https://")):
            raise InputError(f"{where}: base_url must start with http:// or https://")
        if not self.model:
            raise InputError(f"{where}: 'model' (the name the server knows) is missing")
        for key, (kind, low, high) in NUMERIC_BOUNDS.items():
            check_number(getattr(self, key), kind, low, high, f"{where}: {key}")
        if self.price is not None:
            for key in ("prompt", "completion"):
                v = getattr(self.price, key)
                check_number(v, float, 0.0, MAX_PRICE, f"{where}: price.{key}")
        for key in ("messages", "model", "stream"):
            if key in self.params:
                raise InputError(f"{where}: params.{key} is set by stablearena; remove it")
        if not isinstance(self.vision, bool):
            raise InputError(f"{where}: vision must be true or false, not {self.vision!r}")
        if self.family is not None and not (isinstance(self.family, str) and self.family.strip()):
            raise InputError(f'{where}: family must be a non-empty name (e.g. "openai")')

    @property
    def url(self) -> str:
        """The chat-completions URL."""
        return self.base_url.rstrip("/") + "/chat/completions"

    def to_record(self) -> dict[str, Any]:
        """The configuration as plain data (for exports and journals; holds no key)."""
        out = {f: getattr(self, f) for f in self.__dataclass_fields__}
        out["params"] = dict(self.params)
        out["price"] = asdict(self.price) if self.price else None
        out["aliases"] = list(self.aliases)
        out["kind"] = "endpoint"
        return out


@dataclass(frozen=True)
class OfflineModel:
    """Answers read from a file keyed by prompt id (Arena-Hard-Auto's ``model_answer`` JSONL);
    ``model_id`` picks one model's rows when the file holds several."""

    name: str
    answers: Path
    model_id: str | None = None
    family: str | None = None

    def to_record(self) -> dict[str, Any]:
        """The configuration as plain data."""
        return {
            "kind": "offline",
            "name": self.name,
            "answers": str(self.answers),
            "model_id": self.model_id,
            "family": self.family,
        }


_ENDPOINT_KEYS = {f for f in ModelEndpoint.__dataclass_fields__}


def _price(entry: Mapping[str, Any], where: str) -> Price | None:
    raw = entry.get("price")
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) - {"prompt", "completion"}:
        raise InputError(f"{where}: price must be a table {{prompt = …, completion = …}}")
    values = {k: raw.get(k, 0.0) for k in ("prompt", "completion")}
    for k, v in values.items():
        check_number(v, float, 0.0, MAX_PRICE, f"{where}: price.{k}")
    return Price(float(values["prompt"]), float(values["completion"]))


def endpoint_from_mapping(
    entry: Mapping[str, Any], where: str, defaults: Mapping[str, Any] | None = None
) -> ModelEndpoint:
    """One ``[[models]]`` / ``[[judges]]`` table as a :class:`ModelEndpoint`; unknown keys are
    an error naming them (``defaults``: values of a top-level ``[defaults]`` table)."""
    if "api_key" in entry:
        raise InputError(
            f"{where}: a key is never written in the file; set an environment variable "
            "and give its name as api_key_env"
        )
    merged = {**(defaults or {}), **entry}
    unknown = set(merged) - _ENDPOINT_KEYS
    if unknown:
        raise InputError(
            f"{where}: unknown key(s) {sorted(unknown)}; known: {sorted(_ENDPOINT_KEYS)}"
        )
    merged["price"] = _price(merged, where)
    try:
        return ModelEndpoint(**merged)
    except TypeError as exc:
        raise InputError(f"{where}: {exc}") from exc


def models_from_toml(
    data: Mapping[str, Any], where: str = "models"
) -> list[ModelEndpoint | OfflineModel]:
    """The ``[[models]]`` tables of parsed TOML. A table with ``answers = "FILE"`` is an offline
    model; every other needs ``base_url`` and ``model``. Names must be unique."""
    entries = data.get("models")
    if not isinstance(entries, list) or not entries:
        raise InputError(f"{where}: no [[models]] tables; add one per model")
    defaults = data.get("defaults") or {}
    out: list[ModelEndpoint | OfflineModel] = []
    for k, entry in enumerate(entries):
        here = f"{where}: [[models]] #{k + 1}"
        if isinstance(entry, Mapping) and "name" in entry:  # as the arena's routes take names
            entry = {**entry, "name": checked_name(entry["name"], f"{here}: name")}
        if "answers" in entry:
            extra = set(entry) - {"name", "answers", "model_id", "family"}
            if extra or "name" not in entry:
                raise InputError(f"{here}: an offline model has name, answers[, model_id, family]")
            out.append(
                OfflineModel(
                    entry["name"],
                    Path(entry["answers"]),
                    entry.get("model_id"),
                    entry.get("family"),
                )
            )
        else:
            out.append(endpoint_from_mapping(entry, here, defaults))
    names = [m.name for m in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{where}: model names must be unique; repeated: {dup}")
    return out


def read_models(path: str | Path) -> list[ModelEndpoint | OfflineModel]:
    """The models of a models.toml file (``[[models]]`` tables, optional ``[defaults]``)."""
    return models_from_toml(load_toml(path), str(path))
