"""Numeric options at their extremes and output targets (issue 32): a clear error (exit 2, one
message, no traceback) or a correct result, never an internal error or a silent wrong answer."""

from __future__ import annotations

import json
import math
import os
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def _clean_error(code: int, err: str) -> None:
    assert code == 2, err
    assert "internal error" not in err and "Traceback" not in err
    assert err.startswith("error:") and len(err.strip().splitlines()) <= 4


def test_elo_k_beyond_its_bound_is_a_clear_error(cli):
    code, out, err = cli("rank", "--method", "elo", "--elo-k", "1e306", "-f", "json")
    _clean_error(code, err)
    assert "at most 1000" in err and out == ""
    code, out, _ = cli("rank", "--method", "elo", "--elo-k", "32", "-f", "json")
    assert code == 0 and all(math.isfinite(m["rating"]) for m in json.loads(out)["models"])


def test_anchor_beyond_its_bound_is_a_clear_error(cli):
    code, out, err = cli("rank", "--anchor", "aurora-70b=1e308", "-f", "json")
    _clean_error(code, err)
    assert "1,000,000" in err and out == ""
    code, out, _ = cli("rank", "--anchor", "aurora-70b=1200", "-f", "json")
    ratings = {m["model"]: m["rating"] for m in json.loads(out)["models"]}
    assert code == 0 and ratings["aurora-70b"] == pytest.approx(1200)


def test_next_pairs_distinct_says_when_fewer_pairs_exist_than_asked(cli):
    code, out, err = cli("next-pairs", "-k", "1000", "--distinct", "-f", "json")
    payload = json.loads(out)
    assert code == 0 and len(payload["pairs"]) == 66 == 12 * 11 // 2
    assert (
        payload["requested"] == 1000 and "66 pairs, not the 1000 asked for" in payload["notes"][0]
    )
    message = " ".join(err.split())
    assert "warning:" in message and "66 pairs, not the 1000 asked for" in message
    assert "--distinct" in message
    code, out, err = cli("next-pairs", "-k", "5", "--distinct", "-f", "json")
    assert code == 0 and len(json.loads(out)["pairs"]) == 5 and "warning" not in err


# ---------------------------------------------------------------------------------- fuzzing
EXTREMES = st.sampled_from(
    [
        "inf",
        "-inf",
        "nan",
        "1e308",
        "-1e308",
        "1e-320",
        "0",
        "-1",
        "-0.0",
        "2e9",
        str(2**64),
        str(-(2**63)),
        "1e306",
        "0.5",
        "3",
    ]
)
#: rank's numeric options (and the rater each applies to)
FLAGS = [
    ("--elo-k", ["--method", "elo"]),
    ("--shuffles", ["--method", "elo"]),
    ("--seed", ["--method", "elo", "--shuffles", "2"]),
    ("--min-battles", []),
    ("--k-tie", ["--method", "rao-kupper"]),
    ("--confidence", ["--method", "am-elo"]),
    ("--ability-threshold", ["--method", "am-elo"]),
    ("--level", ["--ci", "fisher"]),
    ("--rounds", ["--ci", "bootstrap"]),
    ("--anchor", []),
]
FUZZ = {"examples": 0, "seconds": 0.0}


@pytest.fixture(scope="module")
def small_log(tmp_path_factory):
    """300 battles of 5 models with annotators (fits in milliseconds, unlike the built-in
    example's 20,000 battles)."""
    import random

    rng = random.Random(7)
    models = ["m1", "m2", "m3", "m4", "m5"]
    rows = ["model_a,model_b,winner,annotator"]
    for _ in range(300):
        a, b = rng.sample(models, 2)
        winner = rng.choice(["model_a", "model_b", "model_a", "tie"])
        rows.append(f"{a},{b},{winner},u{rng.randrange(6)}")
    path = tmp_path_factory.mktemp("log") / "votes.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(flag=st.sampled_from(FLAGS), value=EXTREMES)
def test_fuzz_numeric_flags_at_extremes(cli, small_log, flag, value):
    """Each numeric option at inf, nan, ±1e308, huge and negative integers: exit 2 with one
    message, or exit 0 with finite ratings."""
    started = time.perf_counter()
    name, extra = flag
    given_value = f"m1={value}" if name == "--anchor" else value
    if name == "--rounds":  # a huge but valid count would run for long: bounded by the flag
        extra = [*extra, "--min-battles", "0"]
    code, out, err = cli("rank", small_log, "-f", "json", *extra, name, given_value)
    FUZZ["examples"] += 1
    assert "internal error" not in err and "Traceback" not in err, err
    if code == 0:
        payload = json.loads(out)
        assert all(math.isfinite(m["rating"]) for m in payload["models"])
        if name == "--anchor":
            assert abs(float(value)) <= 1e6
    else:
        assert code == 2 and err.strip(), err
    FUZZ["seconds"] += time.perf_counter() - started
    # past capsys (which the next example's output is read from)
    print(f"fuzz flags: {FUZZ['examples']} examples, {FUZZ['seconds']:.2f} s", file=sys.__stderr__)


TARGETS = st.sampled_from(
    [
        "file",
        "link",
        "dangling-link",
        "fifo",
        "directory",
        "missing-dir",
        "input",
        "dash",
        "nested-link",
    ]
)
OUT = {"examples": 0, "seconds": 0.0}


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(target=TARGETS, fmt=st.sampled_from(["json", "csv", "table"]))
def test_fuzz_output_targets(cli, tmp_path_factory, target, fmt):
    """Every kind of ``-o`` target: written as the user meant (a file replaced, a link's target
    replaced and the link kept, a FIFO written through), or a clear error (exit 2)."""
    started = time.perf_counter()
    d = tmp_path_factory.mktemp("out")
    real = d / "real.txt"
    path = d / "out.txt"
    data = d / "votes.csv"
    data.write_text("model_a,model_b,winner\na,b,model_a\nb,a,model_a\nb,a,model_b\n")
    reader = None
    if target == "file":
        path.write_text("old")
    elif target in ("link", "dangling-link", "nested-link"):
        if target != "dangling-link":
            real.write_text("old")
        if target == "nested-link":
            (d / "mid").symlink_to(real)
            path.symlink_to(d / "mid")
        else:
            path.symlink_to(real)
    elif target == "fifo":
        os.mkfifo(path)
        reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    elif target == "directory":
        path = d
    elif target == "missing-dir":
        path = d / "no" / "out.txt"
    elif target == "input":
        path = data
    elif target == "dash":
        path = "-"
    code, out, err = cli("rank", str(data), "-f", fmt, "-o", str(path))
    OUT["examples"] += 1
    assert "internal error" not in err and "Traceback" not in err, err
    if target in ("directory", "missing-dir", "input"):
        assert code == 2 and err.startswith("error:"), err
    else:
        assert code == 0, err
        if target == "fifo":
            got = os.read(reader, 1 << 16)
            os.close(reader)
            assert stat_is_fifo(path) and b"model" in got
        elif target == "dash":
            assert "model" in out
        else:
            written = real if target != "file" else path
            assert "model" in written.read_text()
            if target != "file":
                assert path.is_symlink()
    OUT["seconds"] += time.perf_counter() - started
    print(f"fuzz outputs: {OUT['examples']} examples, {OUT['seconds']:.2f} s", file=sys.__stderr__)


def stat_is_fifo(path) -> bool:
    import stat

    return stat.S_ISFIFO(os.stat(path).st_mode)
