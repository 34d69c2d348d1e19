"""Apache Ranger's policies for a CDAP service, read into a world and written back (issue 37).

``privilog ranger import`` reads a Ranger Admin policies export (or the plugin's download,
``ServicePolicies``) and a roles export, and writes a world whose ``facts:`` hold each enabled
access policy as rows of the ``ranger_*`` relations (docs/ranger.md; the relations' contract is
rules/prelude/ranger.policy's); ``privilog ranger export`` writes a world's Ranger facts and its
grants back as a policies export.

* ``servicedef``: CDAP's Ranger service definition: the levels, their hierarchies, the accesses
* ``globs``: Ranger's value globs: the match, and a program glob over ``type.name`` as privilog patterns
* ``translate``: one policy to its facts (or the refusals that stop it), and back
* ``importing``: an export, a roles export and a base world to a world with facts; the summary
* ``exporting``: a world's facts and grants to an export (and its roles)
* ``worldfile``: a world with ``facts:`` read and written

An application room: it imports the shared bottom of ``privilog`` (``usage``) and the engine's
surface (``engine/__init__.py``'s ``SURFACE``), never another room; ``privilog/cli/ranger.py``
dispatches to it.
"""
