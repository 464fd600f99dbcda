"""The live arena's tables: models, annotators (keys), battles, votes, pair counts, fits, meta.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "models",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("retired", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("outage", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("boost", sa.Float, nullable=False, server_default="1"),
        sa.Column("boost_until", sa.Integer, nullable=False, server_default="0"),
        sa.Column("added_at", sa.Float, nullable=False),
    )
    op.create_table(
        "annotators",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(200), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("key_id", sa.String(32), unique=True),
        sa.Column("key_hash", sa.String(64)),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float),
    )
    op.create_table(
        "battles",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("annotator_id", sa.Integer, sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("model_a", sa.Integer, sa.ForeignKey("models.id"), nullable=False),
        sa.Column("model_b", sa.Integer, sa.ForeignKey("models.id"), nullable=False),
        sa.Column("strategy", sa.String(40), nullable=False),
        sa.Column("propensity", sa.Float),
        sa.Column("served_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_table(
        "votes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("battle_id", sa.String(32), sa.ForeignKey("battles.id"), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("outcome", sa.SmallInteger, nullable=False),
        sa.Column("annotator_id", sa.Integer, sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("model_a", sa.Integer, nullable=False),
        sa.Column("model_b", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("first_at", sa.Float, nullable=False),
        sa.Column("superseded", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.UniqueConstraint("battle_id", "revision", name="uq_votes_battle_revision"),
    )
    op.create_table(
        "pair_counts",
        sa.Column("i", sa.Integer, primary_key=True),
        sa.Column("j", sa.Integer, primary_key=True),
        sa.Column("annotator_id", sa.Integer, primary_key=True),
        sa.Column("wins", sa.Float, nullable=False, server_default="0"),
        sa.Column("losses", sa.Float, nullable=False, server_default="0"),
        sa.Column("ties", sa.Float, nullable=False, server_default="0"),
        sa.Column("ties_both_bad", sa.Float, nullable=False, server_default="0"),
    )
    op.create_table(
        "fits",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("method", sa.String(40), nullable=False),
        sa.Column("as_of_vote", sa.Integer, nullable=False),
        sa.Column("fitted_at", sa.Float, nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
    )
    op.create_table(
        "meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )


def downgrade() -> None:
    for name in ("meta", "fits", "pair_counts", "votes", "battles", "annotators", "models"):
        op.drop_table(name)
