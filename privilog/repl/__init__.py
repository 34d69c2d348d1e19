"""The REPL (``privilog repl``): a session as a library, and the terminal around it.

``session`` runs a line (:class:`Session`, tested through ``one_shot``) by the command
table in ``commands``, whose handlers live by subject (``questions``, ``changes``,
``files``, ``rules``) over what a session holds (``state``); ``terminal`` reads lines
and prints replies, and decides nothing. The REPL imports the API (``privilog.api``),
``privilog.render``, ``privilog.store`` and the layers below; the terminal imports
the session; neither imports another room.
"""

from privilog.repl.session import Reply, Session

__all__ = ["Reply", "Session"]
