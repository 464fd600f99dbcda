"""The named values options accept, in one light module (standard library only).

The command line shows these in ``--help`` and checks them while parsing, before anything heavy
is imported; the library modules that implement them import their constants from here, so the
two cannot drift apart.
"""

from __future__ import annotations

__all__ = [
    "STYLE_METHODS",
    "style_method",
    "RATER_MODULES",
    "CI_METHODS",
    "COMPARE_METHODS",
    "INPUT_FORMATS",
    "OUTPUT_FORMATS",
    "BOTH_BAD",
    "TIE_FORMS",
    "SOLVERS",
    "NORMALIZATIONS",
    "CLUSTERS",
    "PERTURBATIONS",
    "SPLITS",
    "TRUST_CAP",
    "TRUST_RAMP_VOTES",
    "TRUST_RAMP_DAYS",
    "TRUST_RECORD_DAYS",
    "TRUST_YOUNG_SHARE",
    "CROWD_MODEL_VOTES",
    "CROWD_MODEL_VOTES_QUANTILE",
    "CROWD_MODEL_VOTES_MAX",
    "CROWD_FLOOD_DAYS",
    "CROWD_CAP",
]

#: Rater name → the module that defines and registers it (imported on first use; a new rater
#: module adds its names here).
RATER_MODULES: dict[str, str] = {
    "m-elo": "stablearena.raters.bradley_terry",
    "bt": "stablearena.raters.bradley_terry",
    "elo": "stablearena.raters.elo",
    "am-elo": "stablearena.raters.annotator",
    "rao-kupper": "stablearena.raters.ties",
    "davidson": "stablearena.raters.ties",
    "bt-cov": "stablearena.raters.ties",
    "style-m-elo": "stablearena.raters.style",
    "style-bt": "stablearena.raters.style",
    "style-am-elo": "stablearena.raters.style",
}

#: Interval methods of :func:`stablearena.raters.uncertainty.intervals` (``--ci``).
CI_METHODS: tuple[str, ...] = ("fisher", "sandwich", "bootstrap")
#: Methods ``stablearena compare`` fits.
COMPARE_METHODS: tuple[str, ...] = ("m-elo", "bt", "rao-kupper", "davidson")
#: Battle-log formats :func:`stablearena.data.io.read_battles` reads (``--input-format``).
INPUT_FORMATS: tuple[str, ...] = ("csv", "jsonl", "parquet", "json")
#: Output formats of every command (``--format``).
OUTPUT_FORMATS: tuple[str, ...] = ("table", "json", "csv")
#: What to do with both-bad ties (``--both-bad``).
BOTH_BAD: tuple[str, ...] = ("tie", "drop")
#: Factored tie forms of the tie models (``--tie-form``).
TIE_FORMS: tuple[str, ...] = ("nested", "leaderbot")
#: Solvers (``--solver``): newton/adam for m-elo, bt and am-elo; auto/newton/lbfgs for the tie models.
SOLVERS: tuple[str, ...] = ("newton", "adam", "auto", "lbfgs")
#: am-ELO ability normalisations (``--normalization``).
NORMALIZATIONS: tuple[str, ...] = ("mean", "sum")
#: What a clustered bootstrap resamples (``--cluster``).
CLUSTERS: tuple[str, ...] = ("annotator", "prompt")
#: Annotator perturbations of the am-ELO paper's experiment (``--kind``).
PERTURBATIONS: tuple[str, ...] = ("random", "equal", "flip", "mixed")
#: Held-out splits of ``stablearena compare --test-ratio`` (``--split``).
SPLITS: tuple[str, ...] = ("battle", "pair")
#: Bounded influence's defaults (:data:`stablearena.crowd.trust.DEFAULT_CAP`,
#: :data:`stablearena.crowd.trust.DEFAULT_RAMP_VOTES`; ``annotators --cap/--ramp-votes`` and the live
#: arena's ``ability_cap``/``trust_ramp_votes``): the largest weight of one account (average
#: annotator = 1; the value of ``stablearena.crowd.influence.INFLUENCE_ABILITY_CAP``), and the votes
#: after which a new account weighs fully. Chosen in docs/guides/rigging.md (cap 2, ramp 100:
#: honest Kendall τ unchanged within two standard errors on simulated arenas, LLMFAO and the
#: 2024 Chatbot Arena counts).
TRUST_CAP: float = 2.0
TRUST_RAMP_VOTES: float = 100.0
#: Days of record (active days where known) after which a new account weighs fully under
#: bounded influence (its weight grows linearly with them until then, and until then it is
#: young: out of the ability fit; :data:`stablearena.crowd.trust.DEFAULT_RAMP_DAYS`, the live
#: arena's ``trust_ramp_days``, ``experiment rigging --ramp-days``). Chosen in
#: docs/guides/rigging.md ("Young accounts"): 10 rather than 7 makes the last camouflaged
#: family cost 3× m-ELO's votes at +3, at 0.0027 ± 0.0016 held-out τ on simulated arenas.
TRUST_RAMP_DAYS: float = 10.0
#: Active days (distinct UTC days with a vote) an account needs before its weight may exceed an
#: honest annotator's (1): until then its weight is capped at min(cap, 1), however well it
#: agrees with the board (:data:`stablearena.crowd.trust.DEFAULT_RECORD_DAYS`, the live arena's
#: ``trust_record_days``, ``experiment rigging --record-days``). Chosen in
#: docs/guides/rigging.md ("Sleepers"): at 30 days a sleeper 30 days old that warms up on
#: every day reaches the record and weighs 2 (cheaper than on m-ELO); a year costs no honest
#: accuracy measured there.
TRUST_RECORD_DAYS: float = 365.0
#: Largest share of any model's weighted votes that young accounts (fewer than
#: :data:`TRUST_RAMP_DAYS` days of record) may supply together
#: (:func:`stablearena.crowd.trust.young_share_factors`, the live arena's ``trust_young_share``,
#: ``experiment rigging --young-share``). Chosen in docs/guides/rigging.md ("Young accounts
#: together").
TRUST_YOUNG_SHARE: float = 0.2
#: The crowd rule (stablearena.crowd.rule, docs/methods/crowd.md): the least and the most weighted
#: votes one account may give any one model — between them, the 99.9th percentile of the
#: established accounts' votes per (account, model): what an honest voter typically gives a
#: model — and the days of record below which an account is new for the flood test.
CROWD_MODEL_VOTES: float = 10.0
CROWD_MODEL_VOTES_QUANTILE: float = 0.999
CROWD_MODEL_VOTES_MAX: float = 50.0
CROWD_FLOOD_DAYS: float = 10.0
#: The crowd rule's largest weight of one account: the crowd's average vote. An account's
#: agreement with the board buys it no more than an honest visitor's weight (sleepers with 100
#: agreeing warm-up votes otherwise weighed up to 2; docs/methods/crowd.md).
CROWD_CAP: float = 1.0


#: ``--method`` → its style-controlled rater under ``--style``/``--covariate``.
STYLE_METHODS: dict[str, str] = {
    "m-elo": "style-m-elo",
    "bt": "style-bt",
    "am-elo": "style-am-elo",
    "style-m-elo": "style-m-elo",
    "style-bt": "style-bt",
    "style-am-elo": "style-am-elo",
}


def style_method(method: str) -> str:
    """The style-controlled rater for ``method`` (an error for methods without one)."""
    if method not in STYLE_METHODS:
        from .errors import InputError

        raise InputError(
            f"--style/--covariate work with --method m-elo, bt or am-elo, not {method!r}."
        )
    return STYLE_METHODS[method]
