"""Kafka API handlers, one module per area. Importing this package registers every handler.

Each handler is registered with `kafka_api` (see registry.py), which declares, beside it, the request
entity every version is read into, the ACLs it needs and its error answer; the one dispatch path
(dispatch.py) parses, authenticates, authorizes and answers refusals, so a handler holds only the API's
own logic. It reads its request from `request.body` (the newest version's entity; `request.shaped`
where an older version has another shape), and builds the response entity of one version (the newest,
or the newest of the shape the requested version has); the codec carries it over to the version that
was asked for.
"""

from staticfleet.broker.apis import (  # noqa: F401  (each module registers its handlers)
    cluster,
    configs,
    consumer_groups,
    groups,
    offsets,
    produce_fetch,
    security,
    topics,
)
