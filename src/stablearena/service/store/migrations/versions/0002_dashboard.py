"""The dashboard's tables: the pages drawn per published fit, and the admin logins.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

#: Only adds (tables, nullable or defaulted columns, indexes): code of the revision before
#: this one runs on a database migrated to it (docs/guides/several-hosts.md, upgrades).
ADDITIVE = True


def upgrade() -> None:
    op.create_table(
        "dashboard_views",
        sa.Column("fit_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("as_of_vote", sa.Integer, nullable=False),
        sa.Column("fitted_at", sa.Float, nullable=False),
        sa.Column("rendered_at", sa.Float, nullable=False),
        sa.Column("info", sa.Text, nullable=False),
        sa.Column("page", sa.LargeBinary, nullable=False),
        sa.Column("main", sa.LargeBinary, nullable=False),
        sa.Column("admin", sa.LargeBinary, nullable=False),
    )
    op.create_table(
        "dashboard_sessions",
        sa.Column("token_hash", sa.String(64), primary_key=True),
        sa.Column("annotator_id", sa.Integer, sa.ForeignKey("annotators.id"), nullable=False),
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("dashboard_sessions")
    op.drop_table("dashboard_views")
