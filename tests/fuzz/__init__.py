"""A fuzz harness over every input a user or a client controls: privilog fails closed.

Each input kind has its own module (``policies``, ``worlds``, ``imports``,
``requests``, ``cli``, ``repl``, ``scenarios``, ``http``) with two
functions: ``generate(rng, count)`` makes inputs (plain JSON values, so that a
failing one can be written to the corpus and replayed), and ``run(case, context)``
feeds one to privilog and returns a :class:`~tests.fuzz.harness.Verdict`:

* answered: privilog gave an answer (a decision, a listing, a 2xx);
* refused: privilog's own error (a ``PrivilogError``, exit code 2, a 4xx with one line);
* failure: anything else: another exception, an internal error, a 5xx, a dropped
  connection, no answer within the deadline (a hang), or an allow where the input
  must be refused or denied (a malformed request, an unknown operation, entity type,
  action or principal form, a look-alike of an admin, a non-admin changing grants).

Inputs run in worker processes (``tests/fuzz/worker.py``) under a deadline each:
a worker that does not answer in time is killed and the input is a hang.

``python -m tests.fuzz --inputs 100000 [--seed S] [--kinds ...]`` runs the big
campaign; every failing input is written to ``tests/fuzz/corpus/<kind>/<hash>``,
which ``tests/fuzz/test_campaign.py`` replays on every run, beside a small
campaign of its own with a fixed seed.

Pipeline input rows are not fuzzed here: ``privilog/pipeline/inputs.py`` checks rows
only as Spark column expressions, with no check that runs without a SparkSession.
"""
