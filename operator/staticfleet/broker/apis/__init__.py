"""Kafka API handlers, one module per area: a typed request in, a coordinator or topic log call, a typed
kio response out.

Each handler is registered with `kafka_api` (see registry.py) and written once for every version it
serves: it reads the fields all versions share from `request.body`, the others with
`request.optional`, and builds the response entity of one version (the newest, or the newest of the
shape the requested version has); the codec carries it over to the version that was asked for.
Importing this package registers every handler.
"""

from staticfleet.broker.apis import (  # noqa: F401  (each module registers its handlers)
    cluster,
    configs,
    groups,
    offsets,
    produce_fetch,
    security,
    topics,
)
from staticfleet.broker.apis.cluster import api_versions_for, unsupported_version_reply
from staticfleet.broker.apis.sasl_errors import illegal_sasl_state_reply

__all__ = ["api_versions_for", "illegal_sasl_state_reply", "unsupported_version_reply"]
