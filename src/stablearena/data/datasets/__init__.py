"""Built-in data: two small real data sets shipped with the package, and a simulated arena.

- ``llmfao``: the LLMFAO crowd comparisons by Dmitry Ustalov (CC BY 4.0): 8,931 battles of 59
  models judged by 124 annotators, with ties. :func:`load` returns :class:`~stablearena.Battles`.
- ``chatbot-arena-2024``: the Chatbot Arena pair counts of 2024-08-14 as aggregated by the
  leaderbot package (BSD-3-Clause): 1,670,250 battles of 129 models, no annotator ids.
  :func:`load` returns :class:`~stablearena.PairCounts`.
- ``example``: :func:`example_arena`, the default input of ``stablearena rank``. It is
  **simulated**: twelve fictional models with known true ratings, judged by 40 annotators (34
  honest with a spread of abilities, 3 who vote at random, 3 who flip every vote), with Davidson
  ties. Its truth is kept on the returned object so that examples and tests can check recovery.

Every command that reads a battle log takes these names in place of a path
(``stablearena rank llmfao``); an existing file of the same name wins. :func:`path` gives the
file of a real data set, :func:`load` reads it, :func:`info` describes it, and
``stablearena datasets`` lists them. Licences and attribution ship beside the files
(``stablearena/data/datasets/data/ATTRIBUTION.md`` and ``LICENSES/``); see docs/datasets.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ...errors import InputError
from ..battles import Battles, PairCounts
from ..simulate import simulate_battles

__all__ = [
    "Dataset",
    "DATASETS",
    "ExampleArena",
    "example_arena",
    "chatbot_arena_2024",
    "EXAMPLE_SOURCE",
    "DATA_DIR",
    "names",
    "info",
    "path",
    "load",
    "listing",
]

from .registry import DATA_DIR, DATASETS, EXAMPLE_SOURCE, Dataset


def names() -> tuple[str, ...]:
    """The names of the built-in data sets, in the order ``stablearena datasets`` lists them."""
    return tuple(DATASETS)


def info(name: str) -> Dataset:
    """The description of the built-in data set ``name``; an unknown name raises
    :class:`InputError` listing the known ones."""
    try:
        return DATASETS[name]
    except (KeyError, TypeError):
        raise InputError(
            f"unknown data set {name!r}; the built-in data sets are {', '.join(DATASETS)} "
            "(`stablearena datasets` lists them)."
        ) from None


def path(name: str) -> Path:
    """The path of the bundled file of the real data set ``name`` (``llmfao``: a CSV battle log;
    ``chatbot-arena-2024``: leaderbot's JSON pair counts). Any reader of battle logs takes it,
    e.g. ``pandas.read_csv(path("llmfao"))``."""
    dataset = info(name)
    if dataset.filename is None:
        raise InputError(
            f"{name!r} is simulated when it is loaded and has no file: use load({name!r}) or "
            "example_arena()."
        )
    return DATA_DIR / dataset.filename


def load(name: str) -> Battles | PairCounts:
    """Read the built-in data set ``name``: what :func:`stablearena.data.io.read_battles` returns for
    its file (``llmfao``: :class:`Battles`; ``chatbot-arena-2024``: :class:`PairCounts`), with
    the data set's label as ``source``; ``example`` gives ``example_arena().battles``."""
    dataset = info(name)
    if dataset.filename is None:
        return example_arena().battles
    from ..io import read_battles

    return replace(read_battles(path(name)), source=dataset.label)


def listing() -> list[dict[str, object]]:
    """One record per built-in data set (``stablearena datasets --format json``): the fields of
    :class:`Dataset` (``filename`` and ``licence_file`` relative to :data:`DATA_DIR`) and
    ``bytes``, the size of the file (0 for the simulated example)."""
    return [
        {**asdict(d), "bytes": (DATA_DIR / d.filename).stat().st_size if d.filename else 0}
        for d in DATASETS.values()
    ]


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
    return ExampleArena(replace(battles, source=EXAMPLE_SOURCE), ratings, abilities, kinds)


def chatbot_arena_2024(path: str | Path | None = None) -> PairCounts:
    """Chatbot Arena pair counts of 2024-08-14 (leaderbot's aggregation, BSD-3-Clause).

    With no ``path``, the bundled copy (``load("chatbot-arena-2024")``); a ``path`` reads that
    file instead, e.g. the one inside an installed leaderbot
    (``leaderbot/data/chatbotarena_20240814.json``, the same bytes)."""
    if path is None:
        data = load("chatbot-arena-2024")
    else:
        from ..io import read_battles

        data = read_battles(path)
    if not isinstance(data, PairCounts):
        raise InputError(f"{path}: expected a leaderbot pair-count object (models, X, Y).")
    return data
