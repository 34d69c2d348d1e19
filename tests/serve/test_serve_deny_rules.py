"""privilog serve on a policy with a deny rule of its own (issue 32, item 4): over real HTTP, an
explained check and /v1/why name the rule and its place, with its proof and the fixes that take a
premise away; the fix, made through /v1/changes, allows the request."""

from __future__ import annotations

from pathlib import Path

POLICY = (Path(__file__).parents[1] / "engine" / "blocklist.policy").read_text(
    encoding="utf-8"
)  # shared by the deny-rule tests

EVE = {"principal": "user:eve", "operation": "dataset.read", "entity": "dataset:ns1.a"}
RULE = "denied(R) :- request(R, P, _, _), blocked(P)"


def change(client, kind, *items):
    response = client.post("/v1/changes", json={"kind": kind, "items": [list(i) for i in items]})
    assert response.status_code == 200, response.text


def test_a_denial_by_the_policys_rule_is_explained_and_its_fix_allows(setup, tmp_path: Path):
    policy = tmp_path / "deny.policy"
    policy.write_text(POLICY)
    server = setup.serve("--policy", str(policy))
    root = server.client(setup.root)
    change(root, "grant", ("group:bad", "READ", "dataset:ns1.a"))
    change(root, "member.add", ("user:eve", "group:bad"))
    assert root.post("/v1/check", json=EVE).json()["decision"] == "deny"

    explained = root.post("/v1/check", json={**EVE, "explain": True}).json()
    (denial,) = explained["denied_by"]
    assert denial["rule"] == RULE and denial["at"].endswith("deny.policy:6")
    blocked = denial["premises"][1]
    assert blocked["fact"] == "blocked(user:eve)" and blocked["rule"] == "blocked(P) :- member_of(P, G), blocked(G)"
    assert [p["fact"] for p in blocked["premises"]] == ["member_of(user:eve, group:bad)", "blocked(group:bad)"]
    assert explained["fixes"] == [
        [
            {"grant": {"principal": "user:eve", "action": "READ", "entity": "dataset:ns1.a"}},
            {"remove_member": {"principal": "user:eve", "group": "group:bad"}},
        ]
    ]

    why = root.post("/v1/why", json=EVE).json()["explanation"].splitlines()
    assert any(line.startswith(f"└─ denied by the policy's rule {RULE} (") for line in why)
    assert "  1. remove user:eve from group:bad; grant READ on dataset:ns1.a to user:eve" in why

    change(root, "member.remove", ("user:eve", "group:bad"))
    change(root, "grant", ("user:eve", "READ", "dataset:ns1.a"))
    assert root.post("/v1/check", json=EVE).json()["decision"] == "allow"
    mallory = root.post("/v1/check", json={**EVE, "principal": "user:mallory", "explain": True}).json()
    assert mallory["decision"] == "deny" and mallory["denied_by"][0]["premises"][1]["source"] == "policy"
