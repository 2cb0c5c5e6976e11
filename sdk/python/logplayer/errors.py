"""Typed errors of the LogPlayer SDK, and the one answer to "did this write?".

Every error a LogStore node returns carries one ``ErrorDetail`` whose
``applied`` says whether the request that drew it changed anything
(docs/PRODUCER-PROTOCOL.md §2). :func:`applied_of` reads it; every
exception of this module has an :attr:`LogPlayerError.applied` attribute
with the outcome of the *request* (all its attempts combined).

Hierarchy::

    LogPlayerError
    ├── NotWritten           applied NO: nothing was written, safe to send again
    │   ├── ConditionFailed  an expect= condition did not hold
    │   └── Unavailable      no node answered in time, nothing sent was written
    ├── InDoubt              applied MAYBE: it may have committed (Producer.resolve)
    ├── ProducerFenced       a newer instance registered the name: stop
    ├── ProducerBroken       the cluster disagrees on the sequence: make a new producer
    ├── BelowRetention       a read position below retention
    └── UnknownTopic         a read of a topic never written
"""

from __future__ import annotations

import enum
from typing import Optional

import grpc

from ._pb import logstore_pb2 as pb

__all__ = [
    "Applied",
    "LogPlayerError",
    "NotWritten",
    "ConditionFailed",
    "Unavailable",
    "InDoubt",
    "ProducerFenced",
    "ProducerBroken",
    "BelowRetention",
    "UnknownTopic",
    "detail_of",
    "applied_of",
    "encode_status_details",
]

STATUS_DETAILS_KEY = "grpc-status-details-bin"
_DETAIL_TYPE_URL = "type.googleapis.com/logplayer.logstore.v1.ErrorDetail"


class Applied(enum.Enum):
    """Whether a failed request wrote (the wire enum ``Applied``)."""

    NO = pb.APPLIED_NO
    MAYBE = pb.APPLIED_MAYBE
    YES = pb.APPLIED_YES


class LogPlayerError(Exception):
    """Base of every SDK error.

    Attributes:
        applied: whether the request wrote (``Applied.NO``, ``MAYBE``, ``YES``).
        code: the ErrorCode name (``"CONDITION_FAILED"``, …) or ``None``.
        grpc_code: the ``grpc.StatusCode`` of the last answer, or ``None``.
        detail: the last answer's ``ErrorDetail`` message, or ``None``.
    """

    def __init__(self, message: str, *, applied: Applied, code: Optional[str] = None,
                 grpc_code: Optional[grpc.StatusCode] = None,
                 detail: Optional[pb.ErrorDetail] = None) -> None:
        super().__init__(message)
        self.applied = applied
        self.code = code
        self.grpc_code = grpc_code
        self.detail = detail

    @property
    def wrote(self) -> Applied:
        """Alias of :attr:`applied`."""
        return self.applied


class NotWritten(LogPlayerError):
    """The request wrote nothing (a refusal, or nothing was sent)."""

    def __init__(self, message: str, **kw) -> None:
        kw.setdefault("applied", Applied.NO)
        super().__init__(message, **kw)


class ConditionFailed(NotWritten):
    """A condition (``expect=``) did not hold; nothing was written.

    Attributes:
        topic: the topic of the failed condition.
        actual: the topic's next offset at apply time.
    """

    def __init__(self, message: str, *, topic: str, actual: int, **kw) -> None:
        super().__init__(message, **kw)
        self.topic = topic
        self.actual = actual


class Unavailable(NotWritten):
    """No node answered before the deadline and no attempt can have written."""


class InDoubt(LogPlayerError):
    """The transaction may or may not have committed.

    A producer keeps it (unless ``lost``): :meth:`Producer.resolve` sends it
    again with its sequence and learns the outcome without writing twice.

    Attributes:
        producer_id, epoch, sequence: what it was sent with.
        lost: the cluster forgot the producer while the outcome was unknown:
            it cannot be learned from the cluster (look in the log after
            ``after_lsn``).
        after_lsn: if it committed, its LSN is above this one.
    """

    def __init__(self, message: str, *, producer_id: str = "", epoch: int = 0, sequence: int = 0,
                 lost: bool = False, after_lsn: int = 0, **kw) -> None:
        kw.setdefault("applied", Applied.MAYBE)
        super().__init__(message, **kw)
        self.producer_id = producer_id
        self.epoch = epoch
        self.sequence = sequence
        self.lost = lost
        self.after_lsn = after_lsn


class ProducerFenced(LogPlayerError):
    """Another instance registered the producer's name: this one must stop.

    ``applied`` is ``NO``, or ``MAYBE`` when an earlier attempt of the
    transaction may have committed. ``current`` is the newer epoch.
    """

    def __init__(self, message: str, *, current: int = 0, **kw) -> None:
        super().__init__(message, **kw)
        self.current = current


class ProducerBroken(LogPlayerError):
    """The cluster no longer agrees with the producer on its sequence
    (SEQUENCE_REUSED, SEQUENCE_TOO_OLD, SEQUENCE_MISMATCH, or its id used by
    another instance). Every later call raises it; make a new producer."""


class BelowRetention(LogPlayerError):
    """A read's position was deleted by retention; ``oldest`` is the oldest
    LSN (``Client.tail``) or offset (``Client.read_topic``) still kept."""

    def __init__(self, message: str, *, oldest: int, **kw) -> None:
        kw.setdefault("applied", Applied.NO)
        super().__init__(message, **kw)
        self.oldest = oldest


class UnknownTopic(LogPlayerError):
    """A read of a topic that was never written (the leader said so)."""

    def __init__(self, message: str, **kw) -> None:
        kw.setdefault("applied", Applied.NO)
        super().__init__(message, **kw)


# --- google.rpc.Status, by hand (the distribution ships no google.rpc) ---


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated varint")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, i
        shift += 7


def _fields(buf: bytes):
    """Yields (field number, wire type, value) of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _read_varint(buf, i)
        elif wt == 2:
            n, i = _read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def _len_field(num: int, data: bytes) -> bytes:
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def encode_status_details(code: grpc.StatusCode, message: str, detail: pb.ErrorDetail) -> bytes:
    """The ``grpc-status-details-bin`` value carrying ``detail``: a
    ``google.rpc.Status{code, message, details: [Any(detail)]}``."""
    any_ = _len_field(1, _DETAIL_TYPE_URL.encode()) + _len_field(2, detail.SerializeToString())
    return (_varint(1 << 3) + _varint(code.value[0]) + _len_field(2, message.encode())
            + _len_field(3, any_))


def _detail_from_status(raw: bytes) -> Optional[pb.ErrorDetail]:
    try:
        for num, wt, v in _fields(raw):
            if num != 3 or wt != 2:
                continue
            url, value = "", b""
            for n2, w2, v2 in _fields(v):
                if n2 == 1 and w2 == 2:
                    url = v2.decode()
                elif n2 == 2 and w2 == 2:
                    value = v2
            if url.endswith("/logplayer.logstore.v1.ErrorDetail"):
                return pb.ErrorDetail.FromString(value)
    except (ValueError, UnicodeDecodeError):
        return None
    return None


def detail_of(err: grpc.RpcError) -> Optional[pb.ErrorDetail]:
    """The ErrorDetail an RPC error carries, or ``None``."""
    md = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    for k, v in md or ():
        if k == STATUS_DETAILS_KEY:
            return _detail_from_status(v)
    return None


# The default outcome of each ErrorCode, for a server older than
# ErrorDetail.applied (apierr/outcome.go's rules: every code but these is NO).
_MAYBE_CODES = {pb.UNKNOWN_OUTCOME, pb.INTERNAL}
_NO_DETAIL_NO = {grpc.StatusCode.UNIMPLEMENTED}


def applied_of(err: grpc.RpcError, detail: Optional[pb.ErrorDetail] = None) -> Applied:
    """Whether the attempt that failed with ``err`` wrote.

    The detail's ``applied`` when stated; from an older server, its code's
    default; without a detail (the connection, the deadline, gRPC itself):
    ``MAYBE``, except ``UNIMPLEMENTED`` (``NO``). A connection that never
    became ready is recognised by the caller (it knows nothing was sent).
    """
    if detail is None:
        detail = detail_of(err)
    if detail is not None and detail.code != pb.ERROR_CODE_UNSPECIFIED:
        if detail.applied != pb.APPLIED_UNSPECIFIED:
            return Applied(detail.applied)
        return Applied.MAYBE if detail.code in _MAYBE_CODES else Applied.NO
    code = err.code() if hasattr(err, "code") else None
    if detail is not None and detail.applied != pb.APPLIED_UNSPECIFIED:
        return Applied(detail.applied)
    return Applied.NO if code in _NO_DETAIL_NO else Applied.MAYBE


def code_name(detail: Optional[pb.ErrorDetail]) -> Optional[str]:
    """The ErrorCode name of detail (``None`` without one)."""
    if detail is None or detail.code == pb.ERROR_CODE_UNSPECIFIED:
        return None
    return pb.ErrorCode.Name(detail.code)
