"""Start-up: the command line imports heavy modules only where they are used.

``stablearena --help`` and every command's ``--help`` import neither NumPy nor pyarrow, pandas,
SciPy, numba, matplotlib or the web stack; ``stablearena rank`` (m-ELO on a file, the everyday
path) needs NumPy and pyarrow but no pandas, SciPy or numba — so nothing is compiled on first use
and the first run after an install is as fast as the next. Timings are measured by
``bench/bench_foundation.py --only startup``; these tests pin the imports that make them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[1] / "src")
HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "numba", "matplotlib", "fastapi", "sqlalchemy")

_PROBE = """
import io, contextlib, json, sys
from stablearena.cli import main
args = json.loads(sys.argv[1])
out = io.StringIO()
code = 0
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(args)
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "modules": sorted({m.split('.')[0] for m in sys.modules})}))
"""


def loaded_after(*args: str) -> tuple[int, set[str]]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["code"], set(result["modules"])


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["rank", "--help"],
        ["annotators", "--help"],
        ["compare", "--help"],
        ["next-pairs", "--help"],
        ["experiment", "--help"],
        ["experiment", "selection", "--help"],
        ["experiment", "coverage", "--help"],
    ],
    ids=lambda a: " ".join(a),
)
def test_help_imports_nothing_heavy(args):
    code, modules = loaded_after(*args)
    assert code == 0
    heavy = sorted(set(HEAVY) & modules)
    assert not heavy, f"`stablearena {' '.join(args)}` imported {heavy}"


def test_import_of_the_package_and_cli_is_light():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, stablearena, stablearena.cli, stablearena.raters; "
            "print(sorted({m.split('.')[0] for m in sys.modules}))",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert not set(HEAVY) & set(eval(out.stdout))  # noqa: S307 - our own printed list


def test_rank_needs_no_pandas_scipy_or_numba(tmp_path):
    path = tmp_path / "votes.csv"
    path.write_text("model_a,model_b,winner\na,b,model_a\nb,c,tie\nc,a,model_b\nb,a,model_a\n")
    for args in (["rank", str(path)], ["rank"], ["rank", str(path), "-f", "csv"]):
        code, modules = loaded_after(*args)
        assert code == 0
        assert not {"pandas", "scipy", "numba", "matplotlib"} & modules, (args, modules)


def test_fisher_intervals_need_no_pandas_numba_or_scipy_stats():
    code, modules = loaded_after("rank", "--ci", "fisher")
    assert code == 0
    assert not {"pandas", "numba", "matplotlib"} & modules


def test_lazy_names_resolve_and_list():
    import stablearena
    import stablearena.raters as raters

    assert set(stablearena.__all__) == set(stablearena._LAZY)
    assert set(raters.__all__) == set(raters._LAZY)
    for name in stablearena.__all__:
        assert getattr(stablearena, name) is not None
    for name in raters.__all__:
        assert getattr(raters, name) is not None
    with pytest.raises(AttributeError):
        stablearena.no_such_name  # noqa: B018


def test_rater_table_matches_the_registry():
    """stablearena.choices.RATER_MODULES (what --help shows) names every registered rater."""
    from stablearena.choices import RATER_MODULES
    from stablearena.raters.base import rater_class, rater_names

    assert set(RATER_MODULES) == set(rater_names())
    for name, module in RATER_MODULES.items():
        assert rater_class(name).__module__ == module


def test_choice_lists_are_the_librarys():
    from stablearena import choices
    from stablearena.analysis.comparison import COMPARE_METHODS
    from stablearena.data.io import FORMATS
    from stablearena.raters.uncertainty import CI_METHODS
    from stablearena.simulation.perturbation import PERTURBATIONS

    assert CI_METHODS == choices.CI_METHODS and COMPARE_METHODS == choices.COMPARE_METHODS
    assert FORMATS == choices.INPUT_FORMATS and PERTURBATIONS == choices.PERTURBATIONS


def test_help_shows_allowed_values_not_types(cli):
    code, out, _ = cli("rank", "--help")
    assert code == 0
    assert "<str>" not in out and "<bool>" not in out and "<float>" not in out
    assert "[m-elo|bt|elo|am-elo|rao-kupper|davidson|bt-cov|style-m-elo|" in out
    assert "[table|json|csv]" in out and "[none|fisher|sandwich|bootstrap]" in out


def test_root_help_lists_every_command_as_the_full_app_does(cli):
    """The root listing is built from stand-ins (no options); it must read exactly like the
    help of the fully built app."""
    import typer

    from stablearena.cli import app

    full = typer.main.get_command(app)
    ctx = full.make_context("stablearena", ["--help"], resilient_parsing=True)
    expected = full.get_help(ctx)
    code, out, _ = cli("--help")
    assert code == 0
    assert out.strip() == expected.strip()
    for name in full.commands:
        assert f"  {name} " in out


_COERCION_PROBE = """
import contextlib, io, json, sys
{before}
import typer.core
from stablearena.cli import main
code = 0
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({{
    "code": code,
    "patched": bool(getattr(typer.core.build_runtime_param, "_stablearena_fast", False)),
    "pydantic": "pydantic" in sys.modules,
}}))
"""


def _coercion_probe(*args: str, before: str = "") -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _COERCION_PROBE.format(before=before), *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_typer_start_up_patch_still_takes_effect(tmp_path):
    """The CLI replaces Typer's pydantic-based coercion of plain option values (a private
    module, ``typer._coercion``, through ``typer.core.build_runtime_param``; see
    ``stablearena.cli._install_fast_coercion``) — 0.3–0.6 s of every ``stablearena rank``.
    After a Typer upgrade that renames or stops calling it, the patch would silently do nothing;
    this fails instead: the patch must be installed, and ``rank`` must not import pydantic."""
    path = tmp_path / "votes.csv"
    path.write_text("model_a,model_b,winner\na,b,model_a\nb,c,tie\nc,a,model_b\nb,a,model_a\n")
    result = _coercion_probe("rank", str(path))
    assert result["code"] == 0
    assert result["patched"], "stablearena.cli no longer patches typer.core.build_runtime_param"
    assert not result["pydantic"], "Typer's pydantic coercion runs: the start-up patch is void"
    # the check can fail: with the patch kept out, the same command imports pydantic
    off = _coercion_probe(
        "rank",
        str(path),
        before="import typer.core as c; c.build_runtime_param._stablearena_fast = 1",
    )
    assert off["code"] == 0 and off["pydantic"]
