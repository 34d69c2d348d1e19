"""What privilog serve answers a batch with equals check() in process: every conformance row of cdap-5.1.

The server decides /v1/check/batch by ``Authorizer.allows`` (the decision plans), after
following its store; check() evaluates the rules. One server (``--policy cdap-5.1``) is given
the table's entities, then, round after round, grants and memberships through /v1/changes;
each round, every row of the table (each example argument set, listings included) is asked
for three principals in one batch, and each answer must be what check() gives in this
process over the same world, and what ``check_many`` and ``allows`` give here.
"""

from __future__ import annotations

from pathlib import Path

from privilog.engine.patterns import parse_pattern
from privilog.engine.world import Grant, World

import privilog
from privilog import EntityId
from privilog.testing.table import combinations, load_table, to_principal, universe, ways_of

TABLE = load_table(Path(__file__).resolve().parents[1] / "conformance" / "cdap-5.1.yaml")
ALICE, BOB, NOBODY = "user:alice", "user:bob", "user:nobody"
TEAM = "group:team"


def checks() -> list[dict[str, object]]:
    """Every row of the table, with each of its argument sets, for each principal asked."""
    out: list[dict[str, object]] = []
    for row in TABLE.rows:
        for args in row.args:
            for principal in (ALICE, BOB, NOBODY):
                out.append(
                    {"principal": principal, "operation": row.operation, "entity": TABLE.subject(row), "args": dict(args)}
                )
    return out


IN_NAMESPACE = ("application", "artifact", "dataset", "dataset_module", "dataset_type", "securekey", "stream")


def wildcard(entity: str) -> str:
    """A wildcard over everything of the entity's type in its namespace (`artifact:ns1.*`), or the entity."""
    kind, _, name = entity.partition(":")
    return f"{kind}:{name.split('.')[0]}.*" if kind in IN_NAMESPACE else entity


Round = tuple[set[str], set[tuple[str, str, str]], set[tuple[str, str]]]  # entities, grants, memberships


def rounds() -> list[Round]:
    """A world each round, over the table's entities: no grants; what every row requires, to
    alice; every other privilege the table names, to a group alice is in, and the rest to bob;
    and, with what the creates name made (a deploy is then a redeploy), what every row
    requires through wildcards where it can be (they match what a request names that does
    not exist, such as a new artifact)."""
    base = set(TABLE.entities)
    required = {
        g
        for row in TABLE.rows
        for args in row.args
        if all(ways_of(TABLE, row, args))  # a row an argument left out makes unsatisfiable: none
        for combo in combinations(TABLE, row, args)[:1]
        for g in to_principal(combo, ALICE)
    }
    everything = sorted(universe(TABLE))
    half = to_principal(everything[::2], TEAM) | to_principal(everything[1::2], BOB)
    wild = {(p, a, wildcard(e)) for p, a, e in required}
    created = base | {TABLE.subject(row) for row in TABLE.rows}  # what creates name, made
    return [(base, set(), set()), (base, required, set()), (base, half, {(ALICE, TEAM)}), (created, wild, set())]


def test_a_batch_over_http_is_decided_as_check_decides(setup):
    worlds = rounds()
    server = setup.serve("--policy", "cdap-5.1")
    root = server.client(setup.root)
    here = privilog.load("cdap-5.1")
    asked = checks()
    before: Round = (set(), set(), set())
    allowed_somewhere: set[str] = set()
    for entities, grants, members in worlds:
        for kind, items in (
            ("entity.add", sorted(entities - before[0])),
            ("revoke", [list(g) for g in sorted(before[1] - grants)]),
            ("member.remove", [list(m) for m in sorted(before[2] - members)]),
            ("grant", [list(g) for g in sorted(grants - before[1])]),
            ("member.add", [list(m) for m in sorted(members - before[2])]),
        ):
            if items:
                response = root.post("/v1/changes", json={"kind": kind, "items": items})
                assert response.status_code == 200, response.text
        before = (entities, grants, members)
        here.world = World(
            entities={EntityId.parse(e) for e in entities},
            grants={Grant(p, a, parse_pattern(e)) for p, a, e in grants},
            members=set(members),
        )
        here.refresh()

        answer = root.post("/v1/check/batch", json={"checks": asked})
        assert answer.status_code == 200, answer.text
        served = [d == "allow" for d in answer.json()["decisions"]]
        requests = [here.request(c["principal"], c["operation"], c["entity"], c["args"]) for c in asked]
        checked = [here.check(r).allowed for r in requests]
        differs = [(str(r), c, s) for r, c, s in zip(requests, checked, served, strict=True) if c != s]
        assert not differs, f"the server's batch differs from check() (request, check, served): {differs[:5]}"
        assert [d.allowed for d in here.check_many(requests)] == checked
        assert [here.allows(c["principal"], c["operation"], c["entity"], c["args"]) for c in asked] == checked
        allowed_somewhere |= {str(r) for r, c in zip(requests, checked, strict=True) if c}
    # the rounds asked both ways: most operations allowed to alice in some round
    assert len({r.split()[1] for r in allowed_somewhere if r.startswith(ALICE + " ")}) >= len(TABLE.rows) * 3 // 4
