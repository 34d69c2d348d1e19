"""A policy read together with its promises.

The promises of a policy live in ``proofs/POLICY.proof`` (or, where a policy has no
file of its own, ``proofs/common.proof``), written in the policy language. The
proof file is included into the policy, so its rules may use the policy's
relations; the static checks of dsl run over both, and errors name the file they
are in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from privilog.dsl.errors import PolicyError, PrivilogError
from privilog.dsl.ir import Policy, Rule

from privilog import dsl

PROOFS_DIR = Path(__file__).resolve().parent
COMMON = PROOFS_DIR / "common.proof"
PROOF_SUFFIX = ".proof"


@dataclass(frozen=True)
class ProvedPolicy:
    """A checked policy with its proof file's properties and rules merged in."""

    name: str  # as the user named it
    policy: Policy
    proof: Path

    @property
    def own_rules(self) -> tuple[Rule, ...]:
        """The Datalog the policy writes itself: not the prelude's semantics, not the proof's."""
        prelude = (dsl.rules_dir() / f"{dsl.PRELUDE}.policy").resolve()
        own = []
        for rule in self.policy.rules:
            file = Path(rule.span.file)
            if file.suffix == PROOF_SUFFIX or (file.is_file() and file.resolve() == prelude):
                continue
            own.append(rule)
        return tuple(own)

    def facts(self, relation: str) -> set[tuple[str, ...]]:
        """The facts a policy or its proof states for ``relation``."""
        return {
            tuple(str(t) for t in rule.head.terms)
            for rule in self.policy.rules
            if not rule.body and rule.head.predicate == relation
        }


def proof_for(policy_path: Path | None) -> Path:
    """The proof file of a policy: ``proofs/NAME.proof`` beside none, or the common one."""
    if policy_path is not None:
        own = PROOFS_DIR / f"{policy_path.stem}{PROOF_SUFFIX}"
        if own.is_file():
            return own
    return COMMON


def _include(proof: Path) -> str:
    text = str(proof.resolve())
    if '"' in text or "\\" in text:
        raise PrivilogError(f"{proof}: a proof file's path cannot contain quotes or backslashes")
    return f'\ninclude "{text}"\n'


def parse_proved(text: str, file: str = "<policy>", name: str = "", proof: Path | None = None) -> ProvedPolicy:
    """A policy from text, with its promises (``proof``, or the common ones)."""
    proof = proof if proof is not None else proof_for(Path(file) if file != "<policy>" else None)
    if not proof.is_file():
        raise PrivilogError(f"no proof file {proof}")
    policy = dsl.parse_policy(text.rstrip("\n") + "\n" + _include(proof), file)
    if not policy.properties:
        raise PolicyError(f"{proof}: declares no `property`, so there is nothing to prove", policy.span)
    unmade = _world_facts_read(policy)
    if unmade:
        names = ", ".join(f"`{r}`" for r in unmade)
        raise PrivilogError(
            f"{name or policy.name} reads {names} from a world's facts, which the prover's worlds do not have: "
            "its promises would be checked only where those are empty, so it is not proved (its own tests hold it)"
        )
    return ProvedPolicy(name or policy.name, policy, proof)


def _world_facts_read(policy: Policy) -> list[str]:
    """The relations a policy declares for a world's `facts:` (declared, outside the requirement prelude and the
    proofs, with no fact or rule of their own) that a rule reads."""
    prelude = (dsl.rules_dir() / f"{dsl.PRELUDE}.policy").resolve()
    def outside(file: Path) -> bool:
        return file.suffix != PROOF_SUFFIX and not (file.is_file() and file.resolve() == prelude)

    declared = {r.name for r in policy.relations if outside(Path(r.span.file))}
    made = {rule.head.predicate for rule in policy.rules}
    read = {lit.predicate for rule in policy.rules for lit in rule.body if hasattr(lit, "predicate")}
    return sorted((declared - made) & read)


def load_proved(name: str, proof: Path | None = None) -> ProvedPolicy:
    """A policy by name in rules/ (or by path), with its promises."""
    path = dsl.resolve_policy_path(name)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PrivilogError(f"{path}: cannot read the policy: {error}") from None
    return parse_proved(text, str(path), name, proof if proof is not None else proof_for(path))


def shipped_policies() -> list[str]:
    """The policies in rules/ (``cdap``, ``cdap-4.2``, ...) that the prover can prove, in name order: not
    ``ranger-cdap``, whose decisions rest on Ranger's policies (a world's facts; tests/ranger holds it)."""
    return sorted(p.stem for p in dsl.rules_dir().glob("*.policy") if p.stem not in NOT_PROVED)


# shipped policies that read a world's facts, which the prover does not generate (parse_proved refuses them)
NOT_PROVED = frozenset({"ranger-cdap"})
