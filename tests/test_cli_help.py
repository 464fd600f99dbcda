"""Every command's ``--help`` names its values as a person reads them (``TEXT``, ``INTEGER``,
``FILE``, or the option's own ``MODEL``, ``ROLE=NAME``, ``[a|b]``), never as Python types
(``<str>``, ``<list[Path]>``)."""

from __future__ import annotations

import re

import pytest

from stablearena.cli import app


def command_paths() -> list[list[str]]:
    from typer.main import get_command_name

    def name(info) -> str:
        return info.name or get_command_name(info.callback.__name__)

    paths = [[name(info)] for info in app.registered_commands]
    for group in app.registered_groups:
        paths.append([group.name])
        paths += [[group.name, name(info)] for info in group.typer_instance.registered_commands]
    return paths


PYTHON_TYPE = re.compile(r"<\w[^<>]*>|\blist\[|\bPath\b|\bNoneType\b")


def test_every_command_is_scanned():
    paths = command_paths()
    assert ["rank"] in paths and ["serve"] in paths and ["experiment", "selection"] in paths
    assert len(paths) >= 12


@pytest.mark.parametrize("path", command_paths(), ids=" ".join)
def test_help_shows_readable_metavars(cli, path):
    code, out, err = cli(*path, "--help")
    assert code == 0, err
    assert "Usage: stablearena" in out
    options = [line for line in out.splitlines() if line.lstrip().startswith(("-", "PATH"))]
    assert options
    bad = [line for line in options if PYTHON_TYPE.search(line)]
    assert not bad, bad


def test_typical_options_read_as_click_names_them(cli):
    _, out, _ = cli("serve", "--help")
    for shown in ("--port INTEGER", "--config FILE", "--import FILE", "--set KEY=VALUE"):
        assert shown in out
    _, out, _ = cli("experiment", "selection", "--help")
    assert re.search(r"^\s+PATH\s+Battle log", out, re.M)  # an argument: its name alone
    assert "--seeds INTEGER" in out and "--spread FLOAT" in out and "--fit TEXT" in out
