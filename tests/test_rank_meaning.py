"""One meaning of "rank" (issue 31 item 5): with intervals the table's rank is LMArena's
upper-bound rank, labelled "rank (UB)"; the position by rating 1..N is labelled "#"."""

from __future__ import annotations

from stablearena.analysis.leaderboard import interval_records


def test_interval_records_label_the_upper_bound_rank_and_the_position():
    models = [
        {
            "rank": 1,
            "model": "a",
            "rating": 1010.0,
            "ci_low": 990.0,
            "ci_high": 1030.0,
            "rank_low": 1,
            "rank_high": 2,
            "displayed_rank": 1,
            "tier": 1,
            "se": 10.0,
            "battles": 10,
        },
        {
            "rank": 2,
            "model": "b",
            "rating": 1000.0,
            "ci_low": 980.0,
            "ci_high": 1020.0,
            "rank_low": 1,
            "rank_high": 2,
            "displayed_rank": 1,
            "tier": 1,
            "se": 10.0,
            "battles": 10,
        },
    ]
    rows = interval_records(models)
    assert list(rows[0])[:3] == ["rank (UB)", "#", "model"]
    # two models that cannot be told apart share rank (UB) 1; "#" is only their order
    assert [r["rank (UB)"] for r in rows] == [1, 1]
    assert [r["#"] for r in rows] == [1, 2]
    assert "rank" not in rows[0] and "shown rank" not in rows[0]
