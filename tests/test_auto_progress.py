"""`stablearena auto` shows that it is working (issue 42): on a terminal its Rich bar crashed
("'_LazyConsole' object does not support the context manager protocol"), and with standard
error in a log it printed nothing until the run ended (35 s for `auto --demo` at load 1)."""

from __future__ import annotations

from stablearena.cli.auto import _PlainProgress, _progress


def test_the_progress_bar_enters_the_lazy_console():
    bar = _progress(10)
    bar.disable = False  # as on a terminal
    with bar:
        task = bar.add_task("judging", total=10, calls=0, tokens=0, cost=0.0)
        bar.update(task, completed=5, calls=5, tokens=100, cost=0.0)


def test_a_log_gets_a_line_at_the_first_call_and_then_every_few_seconds(capsys):
    now = [0.0]
    plain = _PlainProgress(1000, every=10.0)
    plain.enabled, plain._clock, plain.start = True, lambda: now[0], 0.0
    for t, calls in [(0.5, 0), (1.0, 2), (5.0, 100), (11.5, 400), (12.0, 410), (25.0, 900)]:
        now[0] = t
        plain.update(calls, calls * 100, 0.0)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("judging:")]
    assert [ln.split(" judge calls")[0] for ln in lines] == [
        "judging: 2/1,000",
        "judging: 400/1,000",
        "judging: 900/1,000",
    ]
