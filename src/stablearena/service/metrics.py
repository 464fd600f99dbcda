"""The live arena's Prometheus metrics."""

from __future__ import annotations

import time

from . import store
from .state import ArenaState

__all__ = ["Metrics"]


class Metrics:
    """The worker's Prometheus metrics (``GET /metrics``): votes, battles served and redrawn,
    refit and group-commit times, batch sizes, and the published leaderboard's staleness."""

    def __init__(self, state: ArenaState, writer: store.Writer) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.votes = Counter("stablearena_votes", "Votes recorded", ["kind"], registry=r)
        self.battles = Counter("stablearena_battles_served", "Battles served", registry=r)
        self.redrawn = Counter(
            "stablearena_battles_redrawn",
            "Draws refused because the annotator had judged the pair through another worker",
            registry=r,
        )
        self.refit = Histogram(
            "stablearena_refit_seconds",
            "Time of a refit (the Stable Arena step)",
            registry=r,
            buckets=(0.01, 0.03, 0.1, 0.3, 1, 3, 10, 30, 100),
        )
        self.batch = Histogram(
            "stablearena_commit_batch_size",
            "Writes per group commit",
            registry=r,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512),
        )
        self.commit = Histogram(
            "stablearena_commit_seconds",
            "Time of a group commit (transaction + fsync)",
            registry=r,
            buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5),
        )
        sv = Gauge(
            "stablearena_staleness_votes", "Votes not yet in the published leaderboard", registry=r
        )
        sv.set_function(
            lambda: float(state.votes_seen - (state.fit.as_of_vote if state.fit else 0))
        )
        ss = Gauge(
            "stablearena_staleness_seconds",
            "Age of the published leaderboard when votes are waiting",
            registry=r,
        )
        ss.set_function(
            lambda: (
                float(time.time() - state.fit.fitted_at)
                if state.fit and state.votes_seen > state.fit.as_of_vote
                else 0.0
            )
        )

        def on_commit(n: int, seconds: float) -> None:
            self.batch.observe(n)
            self.commit.observe(seconds)

        writer.on_commit = on_commit
