"""A small hand-written corpus with distinct topics, and queries whose right answer is known."""

from __future__ import annotations

DOCUMENTS: dict[str, str] = {
    "Sourdough baking": (
        "# Sourdough baking\n\n"
        "A sourdough starter is a fermented mixture of flour and water that hosts wild yeast and "
        "lactic acid bacteria. Feed the starter daily with equal weights of flour and water.\n\n"
        "## Proofing\n\nBulk fermentation takes four to six hours at room temperature. A cold retard "
        "in the refrigerator overnight develops a more sour flavour and a blistered crust."
    ),
    "Postgres vacuum": (
        "# PostgreSQL VACUUM\n\n"
        "VACUUM reclaims storage occupied by dead tuples. In normal PostgreSQL operation, rows that are "
        "deleted or obsoleted by an update are not physically removed from their table.\n\n"
        "## Autovacuum\n\nThe autovacuum daemon automates VACUUM and ANALYZE. Tune "
        "autovacuum_vacuum_scale_factor for large tables so that bloat does not accumulate."
    ),
    "Honeybee communication": (
        "# Honeybee waggle dance\n\n"
        "Forager honeybees perform the waggle dance to tell nestmates the direction and distance of "
        "flowers. The angle of the waggle run relative to vertical encodes the direction relative to "
        "the sun; the duration of the run encodes distance."
    ),
    "Kubernetes probes": (
        "# Liveness and readiness probes\n\n"
        "Kubernetes uses liveness probes to know when to restart a container, and readiness probes to "
        "know when a container is ready to start accepting traffic. A failing readiness probe removes "
        "the pod from Service load balancers."
    ),
    "Roman aqueducts": (
        "# Roman aqueducts\n\n"
        "Roman engineers built aqueducts that carried water over long distances using a gentle, "
        "continuous downward gradient. The Pont du Gard in southern France is a famous three-tiered "
        "aqueduct bridge built in the first century."
    ),
}

# (query, title of the document that must rank first)
QUERIES: list[tuple[str, str]] = [
    ("how do bees tell each other where flowers are", "Honeybee communication"),
    ("reclaim disk space from dead rows in postgres", "Postgres vacuum"),
    ("when does kubernetes restart a container", "Kubernetes probes"),
    ("feeding a starter with flour and water", "Sourdough baking"),
    ("ancient water transport bridges", "Roman aqueducts"),
]
