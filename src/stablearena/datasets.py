"""Built-in data: a deterministic simulated example arena, and the Chatbot Arena 2024 pair counts.

:func:`example_arena` is the default input of ``stablearena rank``. It is **simulated**: twelve
fictional models with known true ratings, judged by 40 annotators (34 honest with a spread of
abilities, 3 who vote at random, 3 who flip every vote), with Davidson ties. Its truth is kept on
the returned object so that examples and tests can check recovery.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from .battles import Battles, PairCounts
from .errors import InputError
from .simulate import simulate_battles

__all__ = ["ExampleArena", "example_arena", "chatbot_arena_2024", "EXAMPLE_SOURCE"]

EXAMPLE_SOURCE = "built-in example arena (simulated)"

_EXAMPLE_MODELS = (
    ("aurora-70b", 1180.0),
    ("basalt-34b", 1120.0),
    ("cirrus-8x7b", 1095.0),
    ("delta-13b", 1050.0),
    ("ember-mini", 1030.0),
    ("fjord-7b", 1000.0),
    ("granite-chat", 985.0),
    ("harbor-3b", 950.0),
    ("iris-1.5b", 920.0),
    ("juniper-tiny", 880.0),
    ("kestrel-base", 850.0),
    ("lumen-nano", 790.0),
)


@dataclass(frozen=True)
class ExampleArena:
    """A simulated arena with its truth.

    ``true_ratings`` are Elo-scale ratings in the order of ``battles.models``; ``abilities`` are
    the annotators' θ on the mean-1 scale in the order of ``battles.annotators``; ``kinds`` says
    which annotators are ``honest``, ``random`` or ``flipper``.
    """

    battles: Battles
    true_ratings: np.ndarray
    abilities: np.ndarray
    kinds: tuple[str, ...]


def example_arena(n_battles: int = 20_000, seed: int = 20240814) -> ExampleArena:
    """The deterministic simulated arena used as ``stablearena rank``'s default input."""
    rng = np.random.default_rng(seed)
    names = [n for n, _ in _EXAMPLE_MODELS]
    ratings = np.array([r for _, r in _EXAMPLE_MODELS])
    honest = np.clip(rng.lognormal(0.0, 0.35, 34), 0.3, 3.0)
    abilities = np.concatenate([honest, np.zeros(3), -honest[:3]])
    kinds = ("honest",) * 34 + ("random",) * 3 + ("flipper",) * 3
    battles = simulate_battles(
        ratings,
        n_battles,
        abilities=abilities,
        rule="davidson",
        eta=np.log(0.6),
        models=names,
        annotators=[f"annotator-{k + 1:02d}" for k in range(len(abilities))],
        seed=rng,
    )
    from dataclasses import replace

    return ExampleArena(replace(battles, source=EXAMPLE_SOURCE), ratings, abilities, kinds)


def chatbot_arena_2024(path: str | Path | None = None) -> PairCounts:
    """Chatbot Arena pair counts of 2024-08-14 (leaderbot's aggregation, BSD-3-Clause).

    With no ``path``, the file shipped inside the ``leaderbot`` package is used when that package
    is installed (``pip install leaderbot``).
    """
    from .io import read_battles

    if path is None:
        try:
            ref = resources.files("leaderbot").joinpath("data", "chatbotarena_20240814.json")
        except ModuleNotFoundError:
            raise InputError(
                "the Chatbot Arena 2024 pair counts ship with leaderbot: `pip install leaderbot`, "
                "or pass the path of chatbotarena_20240814.json."
            ) from None
        if not ref.is_file():
            raise InputError(
                "leaderbot is installed but its data file chatbotarena_20240814.json is missing."
            )
        path = Path(str(ref))
    data = read_battles(path)
    if not isinstance(data, PairCounts):
        raise InputError(f"{path}: expected a leaderbot pair-count object (models, X, Y).")
    return data
