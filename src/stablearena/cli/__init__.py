"""The ``stablearena`` command line: a thin layer over the library.

Shared pieces every command uses live in :mod:`stablearena.cli.common`: the Typer ``app`` and the ``experiment`` sub-app,
the option definitions, :func:`load_data` (read + filter a battle log, or the built-in example),
:func:`emit` (table / JSON / CSV output to the terminal or a file) and the error handling of
:func:`main`.

Rules for every module under ``stablearena/cli/`` (they keep ``stablearena --help`` under
0.3 s; ``bench/bench_foundation.py --only startup`` measures it, and
``tests/test_cli_startup.py`` fails when a heavy module is imported at start-up):

* **Imports at module top: the standard library, typer, and the light stablearena modules only**
  (``stablearena.errors``, ``stablearena.choices``, ``stablearena.atomic``, ``stablearena.cli.common``).
  NumPy, pandas, pyarrow, SciPy, numba-compiled modules, matplotlib, FastAPI, SQLAlchemy and
  every other stablearena module are imported INSIDE the command function that needs them. Rich
  is reached through :data:`console` / :data:`err_console`, created on first use.
* **Allowed values** of an option are shown in ``--help`` (``metavar="[a|b]"``) and checked while
  parsing (``callback=one_of(...)``, or the number checks :func:`finite`, :func:`positive`, …),
  so a bad value is a one-line usage error before any work; their lists live in
  :mod:`stablearena.choices`.
* **Output files** are written only through :func:`emit` or, for other files (figures,
  reports), :func:`stablearena.atomic.atomic_open` / ``atomic_path``: a temporary file beside the
  target, fsynced, then renamed. Every command registered on ``app`` or ``experiment_app`` has its
  output paths checked before it runs (any parameter named in :data:`OUTPUT_PARAMS` holding a
  path: writable, not a directory, not one of the command's input paths) — see
  :func:`check_outputs`.
* **Errors** are :class:`stablearena.errors.StableArenaError` (usually ``InputError``) with a
  message naming the file, row, field and value and what to do; :func:`main` prints it as one
  line. Exit codes: 0 success; 2 bad input, bad option or usage error; 1 an internal error (a
  bug), an interruption or an unwritable standard output. ``--debug`` (or ``STABLEARENA_DEBUG=1``)
  shows tracebacks and Python warnings instead.

Layer 10, the top. May import: every layer, the service included (``stablearena serve``).
"""

from . import common as _common
from .common import *  # noqa: F403  (the shared names, as ``stablearena.cli.X``)
from .common import app, main  # noqa: F401  (the entry point and the Typer app)


def __getattr__(name: str):
    """Private helpers of :mod:`stablearena.cli.common` (``_format_cell`` …) under the package's
    name too, as before the split."""
    return getattr(_common, name)


# command modules register themselves on import (keep at the end; they import from .common,
# never from this package, so that the import graph has no circle)
from . import (  # noqa: E402,F401
    am_elo,
    arena_hard,
    auto,
    compare,
    coverage,
    data_sets,
    plot,
    rank,
    rigging,
    selection,
    serve,
)
