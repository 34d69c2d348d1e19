"""privilog: CDAP's authorization policies as Datalog.

The public API: :func:`load` an authorizer for a policy and a world, build a
request with ``authorizer.request(...)``, and ``check`` it for a
:class:`Decision`.
"""

from privilog.api import load
from privilog.dsl import PolicyError, PrivilogError, load_policy
from privilog.engine.authorizer import Authorizer, RequestError
from privilog.engine.decision import Decision, Request, Visible, Witness
from privilog.engine.ids import EntityId
from privilog.engine.world import Grant, NotAnAdmin, World

__all__ = [
    "Authorizer",
    "Decision",
    "EntityId",
    "Grant",
    "NotAnAdmin",
    "PolicyError",
    "PrivilogError",
    "Request",
    "RequestError",
    "Visible",
    "Witness",
    "World",
    "load",
    "load_policy",
]
