"""Settings of ``stablearena serve``: one typed object, read from a TOML file and overridden by
command-line flags.

Two kinds of setting:

- :class:`Settings` — how this server process runs (database URL, address, limits, how often
  it looks for a newer fit). Each process reads its own.
- :class:`ArenaConfig` — how the arena behaves (pair strategy, exploration floor, the Stable
  Arena's δ / ε / policy, refit cadence, corrections, battle lifetime). It lives in the
  database so that every worker process serves the same arena; it is created from the
  defaults on first start, a value given explicitly in the file or on the command line is
  written to the database at start, and an admin can change it at run time
  (``PATCH /v1/admin/config``).

Example ``arena.toml``::

    db = "postgresql+psycopg://arena@127.0.0.1/arena"
    port = 8000
    rate_limit = 20

    [arena]
    exploration = 0.1
    min_records = 50
    ability_threshold = 0.0
    policy = "exclude"
    refit_votes = 200
    refit_seconds = 10
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..choices import (
    CROWD_FLOOD_DAYS,
    CROWD_MODEL_VOTES,
    TRUST_CAP,
    TRUST_RAMP_DAYS,
    TRUST_RAMP_VOTES,
    TRUST_RECORD_DAYS,
    TRUST_YOUNG_SHARE,
)
from ..errors import InputError
from .arena_settings import ArenaPage, CategoryClassifier, JudgeProbes, Moderation, Terms

__all__ = ["ArenaConfig", "Settings", "load_settings", "parse_override", "validation_message"]


#: Upper bounds of the arena's counts and durations (admin values stay far inside the integer
#: and float ranges the database and the clocks handle; beyond them: 422, never 500).
_MAX_COUNT = 1_000_000_000
_MAX_SECONDS = 366 * 24 * 3600.0
#: Upper bound of a rate (requests or battles per second or hour): far above any real one.
_MAX_RATE = 1e9


class ArenaConfig(BaseModel):
    """How the arena behaves; stored in the database (every worker serves the same arena)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    strategy: str | None = Field(
        None,
        description="Pair-selection strategy (stablearena.design.selection); null = the project's "
        "default, selection.DEFAULT_STRATEGY, read at run time.",
    )
    exploration: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="ε of the serving rule: with probability ε a uniform allowed pair instead of "
        "the strategy's pick, so every allowed pair keeps a known positive probability (docs/methods/live-arena.md).",
    )
    min_records: int = Field(
        50,
        ge=0,
        le=_MAX_COUNT,
        description="δ: annotators with fewer votes are left out of the fit for now.",
    )
    ability_threshold: float = Field(
        0.0,
        ge=-1e6,
        le=1e6,
        description="ε of the Stable Arena: flag annotators whose ability is below it.",
    )
    confidence: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description="Flag only when the one-sided upper bound at this level is below ε too.",
    )
    policy: Literal["warn", "exclude"] = Field(
        "exclude",
        description="exclude (the rule docs/guides/rigging.md measured): leave flagged "
        "annotators' votes out of later fits (kept in the log, reconsidered when their data "
        "change); warn: only report them.",
    )
    refit_votes: int = Field(
        100, ge=1, le=_MAX_COUNT, description="K: refit after at most this many new votes."
    )
    refit_seconds: float = Field(
        5.0,
        gt=0.0,
        le=_MAX_SECONDS,
        description="T: refit at most this many seconds after a new vote.",
    )
    warm_start: bool = Field(
        False,
        description="Start each refit from the previous fit instead of the deterministic m-ELO "
        "start. Off by default: am-ELO's likelihood is not jointly concave, and from a start in "
        "another basin (e.g. a fit of the first few votes) Newton can end at another stationary "
        "point, so the leaderboard would no longer be the one `rank` computes.",
    )
    correction_window: float = Field(
        0.0,
        ge=0.0,
        le=_MAX_SECONDS,
        description="Seconds after the first vote during which a different outcome corrects "
        "it (the old vote stays in the history); 0: a different outcome is a 409.",
    )
    battle_ttl: float = Field(
        3600.0,
        gt=0.0,
        le=_MAX_SECONDS,
        description="Seconds a served battle can be voted on (then 410).",
    )
    max_open_battles: int = Field(
        200,
        ge=1,
        le=100_000,
        description="Most battles one annotator may hold served and not voted on (per worker "
        "process; more: 429 too_many_open until it votes or they expire).",
    )
    ability_cap: float | None = Field(
        TRUST_CAP,
        ge=0.0,
        le=1e6,
        description="Bounded influence: no account's votes weigh more than this ability "
        "(average annotator = 1) in the published am-ELO leaderboard; 0 or null: no cap "
        "(docs/guides/annotators.md).",
    )
    trust_ramp_votes: float | None = Field(
        TRUST_RAMP_VOTES,
        ge=0.0,
        le=_MAX_COUNT,
        description="Bounded influence: an account's weight grows linearly with its votes "
        "until this many (new and anonymous /arena identities weigh less); 0 or null: no "
        "ramp. Only counts above min_records matter: below δ votes an account is not fitted.",
    )
    trust_ramp_days: float | None = Field(
        TRUST_RAMP_DAYS,
        ge=0.0,
        le=_MAX_COUNT,
        description="Bounded influence: an account's weight grows linearly with its days of "
        "record (distinct days with a vote where the arena counts them, else days since it was "
        "created) until this many days, so that new identities cost time; until then the "
        "account is young: left out of the ability fit and weighed by its ability alone; "
        "accounts created in the arena's first days and imported ones count as old; 0 or null: "
        "no day ramp (docs/guides/rigging.md, Young accounts).",
    )
    influence_policy: Literal["warn", "exclude"] = Field(
        "exclude",
        description="Influence screening of the published board: exclude (leave accounts whose "
        "push on a model or concentration on one model is beyond its Bonferroni bound out of "
        "that fit, decided afresh at every fit, as docs/guides/rigging.md measured) or warn "
        "(only show the flags); stablearena.crowd.board_rule.",
    )
    trust_record_days: float | None = Field(
        TRUST_RECORD_DAYS,
        ge=0.0,
        le=_MAX_COUNT,
        description="Bounded influence: no account weighs more than an average annotator (1) "
        "until it has this many days of record (distinct days with a vote when the arena "
        "counts them, else days since it was created), however well it agrees with the board; "
        "0 or null: off (docs/guides/rigging.md, Sleepers).",
    )
    trust_young_share: float | None = Field(
        TRUST_YOUNG_SHARE,
        ge=0.0,
        lt=1.0,
        description="Bounded influence: accounts younger than trust_ramp_days days of record "
        "together supply at most this share of any model's weighted votes (their votes on a "
        "model are scaled down where they would supply more), so that many young accounts "
        "cannot buy by number the weight each lacks; 0 or null: off (docs/guides/rigging.md, "
        "Young accounts together).",
    )
    board_rule: Literal["crowd", "am-elo"] = Field(
        "crowd",
        description="The rule the published board is fitted by: crowd (every account's votes "
        "count, abilities shrunk toward the crowd's, at most an honest voter's typical say of "
        "one account on one model, floods of new accounts found by their verdicts; "
        "docs/methods/crowd.md) or am-elo (the Stable Arena of the am-ELO paper: accounts below "
        "min_records left out, bounded influence with the trust ramps; docs/guides/rigging.md).",
    )
    crowd_model_votes: float | None = Field(
        CROWD_MODEL_VOTES,
        ge=0.0,
        le=_MAX_COUNT,
        description="Crowd rule: the least per-model limit of one account — no account gives "
        "any one model more weighted votes than the established accounts' 99.9th-percentile "
        "votes per (account, model), between this and 50 (its votes on a model beyond that "
        "are scaled down); 0 or null: no limit.",
    )
    crowd_flood_days: float | None = Field(
        CROWD_FLOOD_DAYS,
        ge=0.0,
        le=_MAX_COUNT,
        description="Crowd rule: accounts with fewer days of record (distinct days with a vote) "
        "are new; where the new accounts together disagree with the established ones on a "
        "model (Bonferroni z-test), their votes on it do not count; 0 or null: no flood test.",
    )
    boost_factor: float = Field(
        5.0,
        ge=1.0,
        le=1000.0,
        description="Default weight of a boosted model in the exploration draws.",
    )
    boost_until: int = Field(
        3000, ge=0, le=_MAX_COUNT, description="Default number of battles after which a boost ends."
    )

    @field_validator(
        "ability_threshold",
        "exploration",
        "refit_seconds",
        "correction_window",
        "battle_ttl",
        "boost_factor",
        "confidence",
        "ability_cap",
        "trust_ramp_votes",
        "trust_ramp_days",
        "trust_record_days",
        "trust_young_share",
        "crowd_model_votes",
        "crowd_flood_days",
    )
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError("must be a finite number")
        return v

    @field_validator("strategy")
    @classmethod
    def _known_strategy(cls, v: str | None) -> str | None:
        if v is None:
            return v
        from ..design.selection import selector_names

        if v not in selector_names():
            raise ValueError(f"unknown strategy; choose one of {', '.join(selector_names())}")
        return v


class Settings(BaseModel):
    """How one ``stablearena serve`` process runs."""

    model_config = ConfigDict(extra="forbid")

    db: str = Field(
        "sqlite:///arena.db",
        description="SQLAlchemy URL: sqlite:///FILE (WAL, synchronous=FULL) or "
        "postgresql+psycopg://USER@HOST:PORT/DB.",
    )
    host: str = Field("127.0.0.1", description="Address to listen on.")
    workers: int = Field(
        1,
        ge=1,
        le=64,
        description="API worker processes on the one socket and database (one Python process "
        "uses one core at most); each has its own caches, writer and refitter thread.",
    )
    port: int = Field(8000, ge=0, le=65535, description="Port (0: any free port, printed).")
    rate_limit: float = Field(
        50.0,
        gt=0.0,
        le=_MAX_RATE,
        description="Requests per second allowed per key (token bucket).",
    )
    rate_burst: int = Field(
        100, ge=1, le=1_000_000_000, description="Burst size of the per-key rate limit."
    )
    limits: Literal["auto", "database", "host"] = Field(
        "auto",
        description="Where the rate limits per key, per arena-page identity and per address "
        "are kept: database (rows of the database, one limit across every serve host of a "
        "PostgreSQL database, one round trip per check), host (memory shared by the workers "
        "of one serve command: N hosts give N times the limit) or auto (database on "
        "PostgreSQL, host on SQLite).",
    )
    unauthenticated_rate_limit: float = Field(
        1.0,
        gt=0.0,
        le=_MAX_RATE,
        description="Requests per second allowed per client address without a valid key "
        "(token bucket per worker process; over it: 429). Keyed requests are not counted.",
    )
    unauthenticated_burst: int = Field(
        60, ge=1, le=1_000_000_000, description="Burst size of the per-address limit."
    )
    header_timeout: float = Field(
        10.0,
        gt=0.0,
        le=3600.0,
        description="Seconds a client has to send a request's headers and body once it has "
        "started (slow clients are disconnected).",
    )
    keep_alive_timeout: float = Field(
        5.0, gt=0.0, le=3600.0, description="Seconds an idle keep-alive connection stays open."
    )
    max_connections: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="Most connections served at once per worker (more: 503); none: no limit.",
    )
    graceful_timeout: float = Field(
        30.0,
        gt=0.0,
        le=3600.0,
        description="On SIGTERM, seconds the server waits for in-flight requests to finish.",
    )
    drain_seconds: float = Field(
        0.0,
        ge=0.0,
        le=3600.0,
        description="On SIGTERM, seconds the server keeps serving while /healthz answers 503 "
        '("draining"), so that a load balancer takes the host out before it stops listening '
        "(several hosts: docs/guides/several-hosts.md); 0: stop listening at once.",
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Addresses or networks (CIDR) of the load balancers in front of this host "
        "whose X-Forwarded-For names the client (several hosts: docs/guides/several-hosts.md): "
        "the limits per address then count the visitor's address, not the balancer's. Empty: "
        "the connection's own address, and an X-Forwarded-For is ignored (a client cannot "
        "choose the address it is counted as).",
    )
    max_body_bytes: int = Field(
        65536, ge=256, le=1 << 30, description="Largest request body accepted (larger: 413)."
    )
    poll_seconds: float = Field(
        0.5,
        gt=0.0,
        le=3600.0,
        description="How often a worker checks the database for a newer fit, new votes "
        "and configuration changes (every battle and vote written also checks that the "
        "models, keys and settings it was decided by are still current).",
    )
    max_batch: int = Field(
        512,
        ge=1,
        le=1_000_000,
        description="Most writes committed together in one transaction (group commit).",
    )
    fit_in_process: bool = Field(
        True,
        description="Run refits in a separate process (no contention with requests for "
        "Python's interpreter lock); false: in a thread.",
    )
    refit_share: float = Field(
        0.05,
        gt=0.0,
        le=1.0,
        description="Most CPU the refits may take, as a share of the CPU this worker spends "
        "serving: after a fit that took d seconds of CPU the next starts once the worker has "
        "spent d/share seconds of CPU since (or, when it idles, after 10·d/share seconds of wall "
        "time), so that a fit whose cost grows with the arena's cells costs a bounded share per "
        "vote; staleness then grows with the fit's cost.",
    )
    keep_fits: int = Field(
        20, ge=1, le=1_000_000, description="Published fits kept in the database."
    )
    dashboard_share: float = Field(
        0.2,
        gt=0.0,
        le=1.0,
        description="Largest share of one core the dashboard's figures may take: after a "
        "render of c CPU seconds (in a separate, low-priority process) the next waits "
        "c·(1/share − 1) seconds.",
    )
    dashboard_idle: float = Field(
        120.0,
        gt=0.0,
        le=_MAX_SECONDS,
        description="Seconds after the last dashboard request (page, poll or admin view) "
        "during which new fits are drawn; an arena nobody watches draws nothing.",
    )
    session_hours: float = Field(
        12.0, gt=0.0, le=24.0 * 30, description="Lifetime of an admin login on the dashboard."
    )
    switch_interval: float = Field(
        0.0005,
        gt=0.0,
        le=0.1,
        description="Python's thread switch interval in the server (sys.setswitchinterval): "
        "short, so the writer thread gets the interpreter lock back quickly after each "
        "database call.",
    )
    seed: int | None = Field(None, description="Seed of the serving rule's random draws.")
    demo_pace: float = Field(
        0.06,
        ge=0.0,
        le=5.0,
        description="serve --demo: seconds the demo models wait before each streamed word "
        "(three times that after a paragraph), a reading pace; 0: as fast as they can.",
    )
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "warning"
    arena: ArenaConfig = Field(default_factory=ArenaConfig)
    # ---- battles held by the arena (models as endpoints, the /arena page): arena_settings.py
    models: list[dict[str, Any]] = Field(
        default_factory=list,
        description="[[models]] tables: models as OpenAI-compatible endpoints (as in "
        "models.toml; written to the database at start).",
    )
    arena_page: ArenaPage = Field(default_factory=ArenaPage)
    judges: list[dict[str, Any]] = Field(
        default_factory=list,
        description="[[judges]] tables (as in judges.toml): LLM judges that judge every "
        "completed held battle in both orders and vote on it as annotators of the arena.",
    )
    injection: dict[str, Any] = Field(
        default_factory=dict,
        description="[injection] table (as in judges.toml): what the judges do with a battle "
        "whose answer talks to the judge (policy = forfeit | cut | drop | keep; default "
        "forfeit) and an optional classifier endpoint.",
    )
    judge_probes: JudgeProbes = Field(
        default_factory=JudgeProbes,
        description="[judge_probes] table: the share of the judges' calls spent on probe "
        "battles of known verdict; a judge that follows notes to the judge is flagged and "
        "its votes weigh nothing.",
    )
    # a public arena's duties (arena_settings.py; docs/guides/live-arena-security.md)
    moderation: Moderation = Field(default_factory=Moderation)
    terms: Terms = Field(default_factory=Terms)
    category_classifier: CategoryClassifier = Field(default_factory=CategoryClassifier)
    # ---- end of the held-battles block

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies(cls, value: list[str]) -> list[str]:
        import ipaddress

        for v in value:
            try:
                ipaddress.ip_network(v, strict=False)
            except ValueError:
                raise ValueError(
                    f"{v!r} is not an IP address or network (e.g. 10.0.0.2 or 10.0.0.0/24)"
                ) from None
        return value

    @field_validator("db")
    @classmethod
    def _known_db(cls, v: str) -> str:
        if not (v.startswith("sqlite") or v.startswith("postgresql")):
            raise ValueError("must be a sqlite:///FILE or postgresql+psycopg://… URL")
        return v

    def limits_in_database(self) -> bool:
        """Whether the rate limits are kept in the database (setting ``limits``)."""
        if self.limits == "auto":
            return self.db.startswith("postgresql")
        return self.limits == "database"

    def arena_overrides(self) -> dict[str, Any]:
        """The arena settings given explicitly (file or flags): written to the database at start."""
        return self.arena.model_dump(include=self.arena.model_fields_set)

    def redacted_db(self) -> str:
        """The database URL without its password (for messages and the health check)."""
        from sqlalchemy.engine import make_url

        return make_url(self.db).render_as_string(hide_password=True)


def validation_message(exc: ValidationError, where: str) -> str:
    """One line per invalid field: ``where: field: problem``."""
    parts = []
    for err in exc.errors():
        field = ".".join(str(x) for x in err["loc"])
        parts.append(f"{field}: {err['msg']} (got {err.get('input')!r})")
    return f"{where}: " + "; ".join(parts)


def parse_override(item: str) -> tuple[list[str], Any]:
    """``KEY=VALUE`` (``arena.exploration=0.2``) → (path, value); the value is read as TOML
    (numbers, true/false, "strings") and, failing that, as a bare string."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise InputError(
            f"--set {item!r} must look like KEY=VALUE, e.g. --set arena.exploration=0.2."
        )
    toml = _toml()
    try:
        value = toml.loads(f"v = {raw.strip()}")["v"]
    except Exception:
        value = raw.strip()
    return [p.strip() for p in key.split(".")], value


def _toml():  # noqa: ANN202
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # the backport, a dependency on Python 3.10

    return tomli


def load_settings(
    config: Path | None = None,
    overrides: dict[str, Any] | None = None,
    sets: list[str] | None = None,
) -> Settings:
    """Settings from a TOML file, then ``sets`` (``KEY=VALUE``), then ``overrides`` (flags that
    were given). Unknown keys and bad values are an :class:`InputError` naming the field."""
    data: dict[str, Any] = {}
    where = "settings"
    if config is not None:
        where = str(config)
        from ..inputs import check_depth, read_input_text

        text = read_input_text(config, "config")
        try:
            data = _toml().loads(text)
        except RecursionError:
            raise InputError(f"{config}: the TOML nests too deeply to be a config file.") from None
        except Exception as exc:
            raise InputError(f"{config}: not valid TOML: {exc}.") from None
        check_depth(data, str(config))
    for item in sets or ():
        path, value = parse_override(item)
        node = data
        for p in path[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise InputError(f"--set {item!r}: {p} is not a section.")
        node[path[-1]] = value
    for key, value in (overrides or {}).items():
        if value is not None:
            data[key] = value
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise InputError(validation_message(exc, where)) from None
