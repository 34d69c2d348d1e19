"""privilog: CDAP's authorization policies as Datalog.

The public API: :func:`load` an authorizer for a policy and a world, build a
request with ``authorizer.request(...)``, and ``check`` it for a
:class:`Decision`.
"""

from dsl import PolicyError, PrivilogError, load_policy
from engine.authorizer import Authorizer, RequestError
from engine.decision import Decision, Request, Visible, Witness
from engine.ids import EntityId
from engine.world import Grant, NotAnAdmin, World
from privilog.api import load

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
