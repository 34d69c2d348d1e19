"""The engine: a checked policy and a world to answers.

This file is the engine's public surface. ``SURFACE`` names each module the face
(``privilog/``) may import from the engine, and the names it may take from each. The
rest of the engine (the backends, the compiled plans, programs and their analysis,
facts, unfolding, the world's formats and readers, Spark's planning and evaluation)
is the engine's own, and changes without the face noticing. ``tests/test_layout.py``
holds the face to this table and the table to the code: every name listed is defined
where it is listed, and no module of the face imports an engine module or a name that
is not listed.

Importing this package imports nothing else: the table is data, and a module is
loaded only when the face imports it, so that ``privilog check`` stays light.
"""

from __future__ import annotations

SURFACE: dict[str, tuple[str, ...]] = {
    # what a user types: ids and wildcard patterns, parsed and checked
    "ids": (
        "DEFAULT_INSTANCE",
        "ENTITY_TYPES",
        "PRINCIPAL_KINDS",
        "PROGRAM_KINDS",
        "SHAPES",
        "EntityId",
        "IdError",
        "parent_type",
        "parse_principal",
    ),
    "patterns": ("is_pattern", "matches", "parse_pattern", "policy_patterns", "wild_shape"),
    # the world: read (with a place on every value, for scenario files), changed by admins, saved
    "world": (
        "ALL",
        "TABLE_SUFFIX",
        "BatchRefused",
        "Grant",
        "Located",
        "NotAnAdmin",
        "World",
        "WorldError",
        "WorldFile",
        "WorldReader",
        "check_action",
        "check_membership",
        "compose",
        "load_world",
        "read_config",
        "read_facts",
        "save_world",
        "world_from_data",
        "write_tables",
    ),
    # one policy over one world, and its answers as data
    "authorizer": ("Authorizer", "FALSE_WORDS", "RequestError", "TRUE_WORDS"),
    # a request's row of the decisions table (what a decision log's reasons are made of)
    "authorizer.tabling": ("Tabled", "requirement_text"),
    # the compiled backend's state as plain data, and started from it (privilog serve --snapshot)
    "compiled.snapshot": ("FORMAT", "Preloaded", "SnapshotError", "capture", "code_version"),
    "decision": (
        "ABSENT",
        "COMPARED",
        "DERIVED",
        "REQUEST",
        "TABLE",
        "UNTRACED",
        "WORLD",
        "WRITTEN",
        "Change",
        "Decision",
        "Denial",
        "GrantChange",
        "MembershipChange",
        "Outcome",
        "Premise",
        "RemoveMemberChange",
        "Request",
        "Visible",
        "Witness",
        "gathered",
    ),
    # the questions asked of an authorizer beyond check, why and list
    "who": ("Who", "who"),
    "query": ("Answer", "Budget", "EXAMPLE", "QueryLimit", "answer", "parse_query", "time_limit"),
    "justify": ("justify",),
    "coverage": ("deriving_rules",),
    "compare": ("Comparison", "OperationDiff", "Witness"),
    # what a change to a world would do: the accesses it takes away and gives
    "whatif": ("Access", "Impact", "Locality", "impact", "impact_whole", "locality", "reach", "redecide"),
    # a principal's report and an entity's: the grants that reach, through which memberships, and what they allow
    "report": ("EntityReport", "Held", "PrincipalReport", "Reaching", "entity_report", "principal_report"),
    "leastprivilege": ("EXACT_LIMIT", "EXAMPLES", "Evidence", "Held", "Report", "analyse", "report", "verify"),
    "accesslog": ("Rejected", "read_log"),
    # Spark, for privilog/pipeline: the facade takes DataFrames of a world and requests and gives
    # DataFrames of decisions, needs and visibility; the session module starts and tends the session
    "spark.facade": (
        "ALLOWED_BY_TYPE",
        "Decided",
        "Deployment",
        "IdForms",
        "Requests",
        "SparkEngine",
        "decide",
        "deployment",
        "engine",
        "visibility",
    ),
    "spark.session": ("is_connect", "local_driver_memory", "persist", "released", "start"),
}
