"""The REPL (``privilog repl``): a session as a library, and the terminal around it.

``session`` holds every command a line can run (:class:`Session`, tested through
``one_shot``); ``terminal`` reads lines and prints replies, and decides nothing.
The session imports the API (``privilog.api``), ``privilog.render`` and the
layers below; the terminal imports the session; neither imports another room.
"""

from privilog.repl.session import Reply, Session

__all__ = ["Reply", "Session"]
