"""The table of built-in data sets (names, files, licences) — imports nothing of the library, so
that readers can name the data sets in their errors without importing the loaders."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

EXAMPLE_SOURCE = "built-in example arena (simulated)"

#: The folder of the bundled files, their licences (``LICENSES/``) and ``ATTRIBUTION.md``.
DATA_DIR = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Dataset:
    """A built-in data set: its name, what it holds and where it comes from.

    ``filename`` is the bundled file under :data:`DATA_DIR` (``None`` for the simulated
    example); ``label`` names it in output (titles of tables, figures and reports)."""

    name: str
    label: str
    description: str
    filename: str | None
    returns: str
    battles: int
    models: int
    annotators: int | None
    licence: str
    licence_file: str | None
    source: str
    attribution: str


DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            name="llmfao",
            label="LLMFAO (Ustalov, CC BY 4.0)",
            description="crowd comparisons with annotator ids, by Dmitry Ustalov",
            filename="llmfao.csv",
            returns="Battles",
            battles=8_931,
            models=59,
            annotators=124,
            licence="CC BY 4.0",
            licence_file="LICENSES/CC-BY-4.0.txt",
            source="github.com/dustalov/evalica (llmfao.csv)",
            attribution="LLMFAO by Dmitry Ustalov (https://github.com/dustalov/evalica), "
            "CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/)",
        ),
        Dataset(
            name="chatbot-arena-2024",
            label="Chatbot Arena 2024-08-14 (leaderbot)",
            description="Chatbot Arena votes of 2024-08-14 as pair counts",
            filename="chatbot_arena_20240814_pairs.json",
            returns="PairCounts",
            battles=1_670_250,
            models=129,
            annotators=None,
            licence="BSD-3-Clause",
            licence_file="LICENSES/BSD-3-Clause-leaderbot.txt",
            source="leaderbot 0.4.3 (pypi.org/project/leaderbot)",
            attribution="Chatbot Arena votes of 2024-08-14 (https://lmarena.ai), aggregated by "
            "leaderbot (S. Ameli, S. Zhuang, I. Stoica, M. W. Mahoney; "
            "https://github.com/suquark/leaderbot), BSD-3-Clause",
        ),
        Dataset(
            name="example",
            label=EXAMPLE_SOURCE,
            description="simulated with its truth; 6 of 40 annotators unreliable",
            filename=None,
            returns="Battles",
            battles=20_000,
            models=12,
            annotators=40,
            licence="MIT",
            licence_file=None,
            source="stablearena.data.datasets.example_arena()",
            attribution="",
        ),
    )
}
