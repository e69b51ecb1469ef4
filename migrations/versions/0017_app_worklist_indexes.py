"""app work-list indexes: partial indexes on applications for deadline-tagged, MapReduce and listed apps

``applications`` keeps every app the poller saw (no retention). The admission tick's learning
pass (apps tagged ``deadline:`` that no sidecar job owns and nobody learned from) and the
JobHistory collector's work list (finished MapReduce apps not collected yet) filtered the whole
history, so their cost grew with every Spark or untagged app ever seen. A partial index holds
only the apps each list can contain, in the order it reads them. A third holds the apps the RM
still lists, which ``/metrics`` counts by state on every scrape.

The predicates are written out here (not imported) so this revision never changes; the queries
repeat them word for word (``app.db.models.DEADLINE_TAGGED_SQL``, ``MAPREDUCE_SQL``).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02 11:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DEADLINE_TAGGED = "tags LIKE '%,deadline:%' AND tags NOT LIKE '%,sidecar-job:%'"
_MAPREDUCE = "app_type = 'MAPREDUCE'"
_LISTED = "gone_ms IS NULL"


# name, columns, predicate
_INDEXES = (
    ("ix_applications_deadline_tagged", ["finished_ms", "app_id"], _DEADLINE_TAGGED),
    ("ix_applications_mapreduce", ["cluster_id", "finished_ms", "app_id"], _MAPREDUCE),
    ("ix_applications_listed", ["cluster_id", "state"], _LISTED),
)


def upgrade() -> None:
    # Plain CREATE INDEX ... WHERE on both engines: no batch rebuild of the table is needed.
    for name, columns, where in _INDEXES:
        op.create_index(
            name,
            "applications",
            columns,
            unique=False,
            sqlite_where=sa.text(where),
            postgresql_where=sa.text(where),
        )


def downgrade() -> None:
    for name, _, _ in reversed(_INDEXES):
        op.drop_index(name, table_name="applications")
