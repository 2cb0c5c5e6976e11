"""LogPlayer's Python SDK: append exactly once, read topics and the log,
and serve an exactly-once delivery target.

    import logplayer
    c = logplayer.Client("127.0.0.1:7400,127.0.0.1:7401,127.0.0.1:7402", ca="tls/ca.crt", token="…")
    p = c.producer("billing")
    lsn = p.append({"orders": [b'{"id": 1}'], "audit": [b"order 1"]})
    for m in c.read_topic("orders"):
        print(m.offset, m.lsn, m.value)

The wire rules it follows are docs/PRODUCER-PROTOCOL.md and
docs/TARGET-PROTOCOL.md; :mod:`logplayer.target` serves a target.
"""

from .client import Client, Message, Producer, Slice, Transaction
from .errors import (Applied, BelowRetention, ConditionFailed, InDoubt, LogPlayerError, NotWritten,
                     ProducerBroken, ProducerFenced, Unavailable, UnknownTopic)

__all__ = [
    "Client", "Producer", "Message", "Slice", "Transaction",
    "Applied", "LogPlayerError", "NotWritten", "ConditionFailed", "Unavailable", "InDoubt",
    "ProducerFenced", "ProducerBroken", "BelowRetention", "UnknownTopic",
]
