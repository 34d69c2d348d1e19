"""``privilog pipeline``: a policy's answers over a whole deployment, on Apache Spark.

    privilog pipeline decide     --entities E --grants G [--members M] --requests R --out OUT
    privilog pipeline visibility --entities E --grants G [--members M] --out OUT
    privilog pipeline impact POLICY_A POLICY_B --entities E --grants G [--members M] --requests R --out OUT

Inputs are tables in Parquet, CSV (with a header) or JSON lines: ``entities``
(``entity``), ``grants`` (``principal, action, entity``; ``ALL`` is every action),
``members`` (``principal, group``) and ``requests`` (``principal, operation, entity``,
and optionally ``args``, a JSON object, and ``timestamp``); or ``--world WORLD``, a world file or folder
of tables, in place of the deployment's tables (each policy reads it through the ``read_by`` the
command line hands ``register``: an imported Ranger world as CDAP grants, as ``privilog diff`` does).
Outputs are Parquet, CSV or JSON lines (``--out-format``), written as a run: into a staging folder beside ``--out``,
moved into place whole with its manifest ``run.json`` (``runs``), and read back through
it (``privilog pipeline show``, without Spark: ``show``).

Every input row is checked as the reference engine checks a world and a request
(CDAP's id forms, the policy's actions, operations and arguments). A row that
fails goes to ``OUT/rejects`` with its table, the row as JSON and the reason; none
is dropped silently, and the run reports how many there were.

The policy is evaluated by the Spark engine, through its facade (:mod:`engine.spark.facade`): the
tables become the base relations ``grant``, ``member_of``, ``child_of``, ``is_a``,
``request`` and ``request_arg``, ids encoded as 64-bit hashes (checked for
collisions), and the decisions are read back from the relations the reference
authorizer reads (``allowed``, ``applies``, ``met``, ``lacking``).

A request may name an entity the inventory does not hold (a create): its place in
the hierarchy comes from its id, for that request alone, as in the reference
engine. Requests are therefore decided in rounds: first every request whose
entity and enclosing entities exist, over the inventory alone; then the others
with their own not-yet-existing entities added, deferring to a later round any
request whose entity encloses another request's not-yet-existing entity, so that
no request sees an entity another request brought.

The room: ``tables`` (formats, reading, writing, the Spark session), ``inputs``
(checking rows), ``context`` (a run: its session, inputs and manifest), ``runs`` (a run's
folder and manifest), ``show`` (reading a run with pyarrow), ``console`` (the JVM's
lines filtered, the heartbeat), ``commands`` (the command line and its runs), and
``generate`` beside them (synthetic deployments in the same tables); ``results``,
``summary`` and ``report`` read a run's tables back with pyarrow, without Spark
(``privilog pipeline report``). It imports ``privilog.usage``, ``privilog.render``
and the layers below (``dsl``, ``engine``; of ``engine.spark``, its facade and its session module);
never the API's other rooms.
PySpark is imported only inside functions, when a command runs.
"""
