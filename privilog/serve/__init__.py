"""``privilog serve``: the authorization backend over HTTP.

An application room: it imports the shared bottom of the face (``privilog.store``,
``privilog.render``, ``privilog.api``, ``privilog.usage``) and the layers below
(``engine``, ``dsl``), never another application room. Only ``privilog.cli``
imports it.

* ``bodies``: JSON bodies read strictly (size, fields, types), errors of one line;
* ``cdap``: CDAP's entity and principal JSON shapes, to and from privilog's ids;
* ``metrics``: Prometheus counters and histograms, written as text;
* ``decisionlog``: each decision (or a sample) as a JSON line;
* ``app``: the Starlette application (``make_app``), its routes and their handlers;
* ``openapi``: the OpenAPI document, from the routes;
* ``server``: binding, uvicorn, signals (``serve``).
"""
