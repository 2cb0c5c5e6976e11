"""The LogStore client: exactly-once producers and readers.

Written from docs/PRODUCER-PROTOCOL.md. A :class:`Client` holds one gRPC
channel per node address (lazily opened, learned leaders added). Writes go
to the leader, following NOT_LEADER redirects; reads go to the leader when
one is known (learned with Status before a read when needed, so reads see
every acknowledged write), else to any node.
"""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Mapping, Optional, Sequence, TypeVar, Union

import grpc

from ._pb import logstore_pb2 as pb
from ._pb import logstore_pb2_grpc as pb_grpc
from .errors import (Applied, BelowRetention, ConditionFailed, InDoubt, LogPlayerError, NotWritten,
                     ProducerBroken, ProducerFenced, Unavailable, UnknownTopic, applied_of, code_name,
                     detail_of)

__all__ = ["Client", "Producer", "Message", "Transaction", "Slice"]

PemSource = Union[str, bytes, Path, None]
T = TypeVar("T")

# Codes about the node or the moment: another node or a later try may answer
# otherwise (docs/PRODUCER-PROTOCOL.md §2).
_TRANSIENT_CODES = {pb.NOT_LEADER, pb.QUEUE_FULL, pb.SHUTTING_DOWN, pb.UNKNOWN_OUTCOME}
# gRPC codes of an answer without a detail that is about the connection or
# the moment.
_TRANSIENT_GRPC = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                   grpc.StatusCode.CANCELLED, grpc.StatusCode.ABORTED}

MAX_NAME_BYTES = 256  # logstore.MaxNameLen: a producer name's limit
BACKOFF_MIN, BACKOFF_MAX = 0.05, 1.0


def _pem(src: PemSource) -> Optional[bytes]:
    """PEM bytes from bytes, or from a file path."""
    if src is None:
        return None
    if isinstance(src, bytes):
        return src
    return Path(src).read_bytes()


@dataclasses.dataclass(frozen=True)
class Message:
    """One message of a topic.

    Attributes:
        topic: the topic.
        offset: its dense per-topic position (0, 1, 2, …).
        lsn: the LSN of the transaction that wrote it.
        key, value: its key (``b""`` when none) and value.
        headers: its headers as (key, value) pairs.
        timestamp_unix_nano: the commit time of its transaction.
    """

    topic: str
    offset: int
    lsn: int
    key: bytes
    value: bytes
    headers: tuple = ()
    timestamp_unix_nano: int = 0


@dataclasses.dataclass(frozen=True)
class Slice:
    """What one committed transaction wrote to one topic."""

    topic: str
    first_offset: int
    messages: List[Message]


@dataclasses.dataclass(frozen=True)
class Transaction:
    """A committed transaction as :meth:`Client.tail` yields it."""

    lsn: int
    timestamp_unix_nano: int
    slices: List[Slice]


def _message(topic: str, offset: int, lsn: int, ts: int, m: pb.Message) -> Message:
    return Message(topic=topic, offset=offset, lsn=lsn, key=m.key, value=m.value,
                   headers=tuple((h.key, h.value) for h in m.headers), timestamp_unix_nano=ts)


class _Attempt(Exception):
    """One failed attempt, classified (internal)."""

    def __init__(self, err: grpc.RpcError, detail: Optional[pb.ErrorDetail], applied: Applied,
                 transient: bool, addr: str) -> None:
        super().__init__(str(err))
        self.err, self.detail, self.applied, self.transient, self.addr = err, detail, applied, transient, addr

    @property
    def code(self) -> Optional[str]:
        return code_name(self.detail)

    def fields(self) -> dict:
        """Keyword arguments for a LogPlayerError describing this attempt."""
        code = self.err.code() if hasattr(self.err, "code") else None
        return {"code": self.code, "grpc_code": code, "detail": self.detail}

    def message(self) -> str:
        details = self.err.details() if hasattr(self.err, "details") else str(self.err)
        return f"{self.addr}: {self.code or self.err.code().name}: {details}"


class Client:
    """A client of a LogStore cluster.

    Args:
        addresses: the nodes' API addresses (``"host:port"``), a list or one
            comma-separated string. Leaders named by NOT_LEADER are added.
        ca: the CA certificate (PEM bytes or a file path): dial with TLS,
            verifying the servers. ``None``: plaintext.
        token: a bearer token (the token itself, e.g.
            ``Path("tls/cli.token").read_text().strip()``), sent as
            ``authorization: Bearer …`` (needs ``ca``).
        cert, key: a client certificate and its key (PEM bytes or paths)
            for mutual TLS: the identity is the certificate's common name.
        timeout: default deadline of one call, retries included (seconds).
        attempt_timeout: deadline of one attempt (seconds).
        server_name: the name every server certificate must carry (default:
            the host dialed).
    """

    def __init__(self, addresses: Union[str, Sequence[str]], ca: PemSource = None, token: Optional[str] = None,
                 cert: PemSource = None, key: PemSource = None, *, timeout: float = 30.0,
                 attempt_timeout: float = 5.0, server_name: Optional[str] = None) -> None:
        if isinstance(addresses, str):
            addresses = [a for a in addresses.split(",") if a]
        if not addresses:
            raise ValueError("logplayer: no LogStore address")
        if token is not None and ca is None:
            raise ValueError("logplayer: a bearer token needs TLS (ca=)")
        if (cert is None) != (key is None):
            raise ValueError("logplayer: cert and key go together")
        self.timeout = timeout
        self.attempt_timeout = attempt_timeout
        self._creds: Optional[grpc.ChannelCredentials] = None
        self._options: list = [("grpc.max_receive_message_length", 64 << 20)]
        if server_name:
            self._options.append(("grpc.ssl_target_name_override", server_name))
        if ca is not None:
            creds = grpc.ssl_channel_credentials(root_certificates=_pem(ca), private_key=_pem(key),
                                                 certificate_chain=_pem(cert))
            if token is not None:
                creds = grpc.composite_channel_credentials(creds, grpc.access_token_call_credentials(token))
            self._creds = creds
        self._lock = threading.Lock()
        self._addrs: List[str] = list(dict.fromkeys(addresses))
        self._channels: Dict[str, grpc.Channel] = {}
        self._conns: Dict[str, "_Connectivity"] = {}
        self._leader: Optional[str] = None
        self._next = random.randrange(len(self._addrs))
        self._closed = False

    # --- plumbing ---

    def close(self) -> None:
        """Closes every channel."""
        with self._lock:
            self._closed = True
            chans, self._channels, self._conns = list(self._channels.values()), {}, {}
        for ch in chans:
            ch.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _channel(self, addr: str) -> grpc.Channel:
        with self._lock:
            if self._closed:
                raise NotWritten("logplayer: client closed")
            ch = self._channels.get(addr)
            if ch is None:
                if self._creds is not None:
                    ch = grpc.secure_channel(addr, self._creds, options=self._options)
                else:
                    ch = grpc.insecure_channel(addr, options=self._options)
                self._channels[addr] = ch
                self._conns[addr] = _Connectivity()
                ch.subscribe(self._conns[addr].update, try_to_connect=True)
            return ch

    def _pick(self, leader: bool) -> str:
        with self._lock:
            if leader and self._leader:
                return self._leader
            addr = self._addrs[self._next % len(self._addrs)]
            return addr

    def _failed(self, addr: str) -> None:
        """Moves the rotation past addr (and forgets it as leader)."""
        with self._lock:
            if self._leader == addr:
                self._leader = None
            if self._addrs[self._next % len(self._addrs)] == addr:
                self._next += 1

    def _set_leader(self, addr: str) -> None:
        with self._lock:
            if addr not in self._addrs:
                self._addrs.append(addr)
            self._leader = addr

    def _attempt(self, addr: str, fn: Callable[[pb_grpc.LogStoreStub, float], T], deadline: float) -> T:
        """Runs one attempt on addr; raises _Attempt on failure."""
        timeout = max(0.001, min(self.attempt_timeout, deadline - time.monotonic()))
        ch = self._channel(addr)
        if not self._conns[addr].wait_ready(ch, timeout):
            # Never connected: nothing was sent (applied NO).
            raise _Attempt(_NotSent(addr), None, Applied.NO, True, addr)
        try:
            return fn(pb_grpc.LogStoreStub(ch), timeout)
        except grpc.RpcError as err:
            d = detail_of(err)
            applied = applied_of(err, d)
            if d is not None and d.code != pb.ERROR_CODE_UNSPECIFIED:
                transient = d.code in _TRANSIENT_CODES
            else:
                transient = err.code() in _TRANSIENT_GRPC
            raise _Attempt(err, d, applied, transient, addr) from None

    def _call(self, fn: Callable[[pb_grpc.LogStoreStub, float], T], *, leader: bool, retry_maybe: bool,
              timeout: Optional[float] = None, outcome: Optional["_Outcome"] = None) -> T:
        """Runs fn on one node after another until it succeeds, fails with a
        refusal that is not about the node or the moment, fails with an
        unknown outcome and retry_maybe is false, or the deadline passes.
        Raises the last _Attempt, with applied combined over the attempts;
        outcome.maybe is set when an attempt may have written (also when a
        later one succeeded)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        backoff, maybe, redirected = BACKOFF_MIN, False, False
        while True:
            addr = self._pick(leader)
            try:
                result = self._attempt(addr, fn, deadline)
                if leader:
                    with self._lock:
                        if self._leader is None:
                            self._leader = addr
                return result
            except _Attempt as a:
                if a.applied != Applied.NO:
                    maybe = True
                    if outcome is not None:
                        outcome.maybe = True
                if a.detail is not None and a.detail.code == pb.NOT_LEADER:
                    to = a.detail.leader_address
                    if to and to != addr:
                        self._set_leader(to)
                        if not redirected:
                            redirected = True
                            continue
                    else:
                        self._failed(addr)
                    redirected = False
                elif a.transient:
                    self._failed(addr)
                if maybe:
                    a.applied = Applied.MAYBE
                if not a.transient or (a.applied == Applied.MAYBE and not retry_maybe):
                    raise a
                if time.monotonic() + backoff >= deadline:
                    raise a
                time.sleep(backoff * (0.5 + random.random() / 2))
                backoff = min(2 * backoff, BACKOFF_MAX)

    @staticmethod
    def _error(a: _Attempt, what: str) -> LogPlayerError:
        """The typed error of a failed call that is not a producer's."""
        msg = f"logplayer: {what}: {a.message()}"
        if a.detail is not None and a.detail.code == pb.BELOW_RETENTION:
            return BelowRetention(msg, oldest=a.detail.oldest_lsn or a.detail.oldest_offset, **a.fields())
        if a.detail is not None and a.detail.code == pb.UNKNOWN_TOPIC:
            return UnknownTopic(msg, **a.fields())
        if a.detail is not None and a.detail.code == pb.CONDITION_FAILED:
            return ConditionFailed(msg, topic=a.detail.topic, actual=a.detail.actual_next_offset, **a.fields())
        if a.applied == Applied.NO:
            if a.transient:
                return Unavailable(msg, **a.fields())
            return NotWritten(msg, **a.fields())
        if a.applied == Applied.MAYBE:
            return InDoubt(msg, **a.fields())
        return LogPlayerError(msg, applied=a.applied, **a.fields())

    # --- calls ---

    def status(self, address: Optional[str] = None) -> pb.StatusResponse:
        """The Status of ``address`` (default: any node)."""
        def fn(s: pb_grpc.LogStoreStub, t: float) -> pb.StatusResponse:
            return s.Status(pb.StatusRequest(), timeout=t)
        if address is not None:
            try:
                return self._attempt(address, fn, time.monotonic() + self.timeout)
            except _Attempt as a:
                raise self._error(a, "status") from None
        try:
            return self._call(fn, leader=False, retry_maybe=True)
        except _Attempt as a:
            raise self._error(a, "status") from None

    def append(self, slices: Mapping[str, Sequence[bytes]], expect: Optional[Mapping[str, int]] = None,
               key: Optional[bytes] = None) -> int:
        """Appends one transaction WITHOUT a producer and returns its LSN.

        Retried only while no attempt can have written; an unknown outcome
        raises :class:`InDoubt` (use :meth:`producer` for exactly once).
        """
        req = _request(slices, expect, key)
        try:
            resp = self._call(lambda s, t: s.Append(req, timeout=t), leader=True, retry_maybe=False)
        except _Attempt as a:
            raise self._error(a, "append") from None
        return resp.lsn

    def init_producer(self, name: str) -> tuple[str, int]:
        """Registers ``name`` (InitProducer) and returns (id, epoch).

        FEATURE_NOT_ENABLED (a cluster below version 3) is retried until the
        client's timeout; a retry after an unknown outcome may register twice
        (the later epoch wins, which is harmless)."""
        if not name or len(name.encode()) > MAX_NAME_BYTES:
            raise ValueError(f"logplayer: producer name must be 1..{MAX_NAME_BYTES} bytes")
        deadline = time.monotonic() + self.timeout
        backoff = BACKOFF_MIN
        while True:
            try:
                resp = self._call(lambda s, t: s.InitProducer(pb.InitProducerRequest(name=name), timeout=t),
                                  leader=True, retry_maybe=True, timeout=max(0.001, deadline - time.monotonic()))
                return resp.producer_id, resp.epoch
            except _Attempt as a:
                if a.detail is None or a.detail.code != pb.FEATURE_NOT_ENABLED or time.monotonic() + backoff > deadline:
                    raise self._error(a, f"register producer {name!r}") from None
                time.sleep(backoff)
                backoff = min(2 * backoff, BACKOFF_MAX)

    def producer(self, name: Optional[str] = None, max_in_flight: int = 5) -> "Producer":
        """A registered producer called ``name`` (default: a random name),
        with up to ``max_in_flight`` (1..5) appends of concurrent threads
        pipelined.

        It registers on first use; registering a name fences every older
        instance of it (they get :class:`ProducerFenced`)."""
        return Producer(self, name or "p-" + "".join(random.choice("0123456789abcdef") for _ in range(32)),
                        max_in_flight)

    def _find_leader(self) -> None:
        """Learns the leader when none is known, so reads see every
        acknowledged write (a follower may lag behind)."""
        with self._lock:
            known = self._leader is not None
        if not known:
            self._leader_addr()

    def _leader_addr(self) -> Optional[str]:
        """Asks the nodes who leads (Status), remembering it."""
        with self._lock:
            addrs = list(self._addrs)
        for addr in addrs:
            try:
                st = self.status(addr)
            except LogPlayerError:
                continue
            if st.leader_address:
                self._set_leader(st.leader_address)
                return st.leader_address
        return None

    def read_topic(self, topic: str, offset: int = 0, limit: Optional[int] = None,
                   follow: bool = False) -> Iterator[Message]:
        """Yields the messages of ``topic`` from ``offset``, in offset order.

        Without ``follow`` it ends at the topic's current end (or after
        ``limit`` messages); with ``follow`` it waits for new messages
        forever. A broken stream is reopened on another node from the next
        offset, without gap or duplicate (offsets are checked dense).

        Raises :class:`UnknownTopic` for a topic the leader says was never
        written, :class:`BelowRetention` below the oldest kept offset.
        """
        nxt, left = offset, limit
        backoff, deadline = BACKOFF_MIN, None
        asked_leader = False
        self._find_leader()
        while left is None or left > 0:
            addr = self._pick(True)
            req = pb.ReadTopicRequest(topic=topic, from_offset=nxt, follow=follow, max_messages=left or 0)
            try:
                ch = self._channel(addr)
                for resp in pb_grpc.LogStoreStub(ch).ReadTopic(req):
                    for tm in resp.messages:
                        if tm.offset != nxt:
                            raise LogPlayerError(
                                f"logplayer: {addr}: topic {topic!r} stream sent offset {tm.offset}, expected {nxt}",
                                applied=Applied.NO)
                        nxt += 1
                        backoff, deadline = BACKOFF_MIN, None
                        yield _message(topic, tm.offset, tm.lsn, tm.timestamp_unix_nano, tm.message)
                        if left is not None:
                            left -= 1
                return
            except grpc.RpcError as err:
                d = detail_of(err)
                a = _Attempt(err, d, Applied.NO, False, addr)
                if d is not None and d.code == pb.UNKNOWN_TOPIC:
                    with self._lock:
                        is_leader = self._leader == addr
                    if is_leader or asked_leader:
                        raise self._error(a, f"read topic {topic!r}") from None
                    asked_leader = True
                    if self._leader_addr() is None:
                        self._failed(addr)
                    continue
                if d is not None and d.code not in _TRANSIENT_CODES and d.code != pb.ERROR_CODE_UNSPECIFIED:
                    raise self._error(a, f"read topic {topic!r}") from None
                if d is None and err.code() not in _TRANSIENT_GRPC:
                    raise self._error(a, f"read topic {topic!r}") from None
                self._failed(addr)
                now = time.monotonic()
                deadline = deadline or now + self.timeout
                if now > deadline:
                    raise self._error(a, f"read topic {topic!r}") from None
                time.sleep(backoff)
                backoff = min(2 * backoff, BACKOFF_MAX)

    def tail(self, from_lsn: int = 1, to_lsn: int = 0, topics: Optional[Sequence[str]] = None) -> Iterator[Transaction]:
        """Yields committed transactions in LSN order from ``from_lsn``
        (through ``to_lsn``; 0 follows the log forever), only the slices of
        ``topics`` when given. Resumes after a broken stream from the last
        LSN it considered, without gap or duplicate."""
        nxt = max(1, from_lsn)
        backoff, deadline = BACKOFF_MIN, None
        self._find_leader()
        while to_lsn == 0 or nxt <= to_lsn:
            addr = self._pick(True)
            req = pb.ReadRequest(from_lsn=nxt, to_lsn=to_lsn, topics=list(topics or ()))
            try:
                for resp in pb_grpc.LogStoreStub(self._channel(addr)).Read(req):
                    for tx in resp.transactions:
                        if tx.lsn < nxt or (not topics and tx.lsn != nxt):
                            raise LogPlayerError(f"logplayer: {addr}: read stream sent lsn {tx.lsn}, expected {nxt}",
                                                 applied=Applied.NO)
                        nxt = tx.lsn + 1
                        backoff, deadline = BACKOFF_MIN, None
                        yield Transaction(tx.lsn, tx.timestamp_unix_nano, [
                            Slice(s.topic, s.first_offset,
                                  [_message(s.topic, s.first_offset + i, tx.lsn, tx.timestamp_unix_nano, m)
                                   for i, m in enumerate(s.messages)])
                            for s in tx.slices])
                    nxt = max(nxt, resp.read_through_lsn + 1)
                return
            except grpc.RpcError as err:
                d = detail_of(err)
                a = _Attempt(err, d, Applied.NO, False, addr)
                if (d is not None and d.code not in _TRANSIENT_CODES and d.code != pb.ERROR_CODE_UNSPECIFIED) or \
                        (d is None and err.code() not in _TRANSIENT_GRPC):
                    raise self._error(a, "tail") from None
                self._failed(addr)
                now = time.monotonic()
                deadline = deadline or now + self.timeout
                if now > deadline:
                    raise self._error(a, "tail") from None
                time.sleep(backoff)
                backoff = min(2 * backoff, BACKOFF_MAX)


class _Connectivity:
    """A channel's connectivity, followed by one subscription for the
    channel's life (short-lived readiness futures raced grpcio 1.51's
    poller thread at close: "Cannot invoke RPC: Channel closed!")."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.state: Optional[grpc.ChannelConnectivity] = None

    def update(self, state: grpc.ChannelConnectivity) -> None:
        with self.cond:
            self.state = state
            self.cond.notify_all()

    def wait_ready(self, ch: grpc.Channel, timeout: float) -> bool:
        """Whether the channel is connected, asking it to connect and
        waiting at most timeout seconds when it is not."""
        with self.cond:
            if self.state == grpc.ChannelConnectivity.READY:
                return True
        kick = lambda _state: None  # noqa: E731 - subscribing with try_to_connect asks to connect
        ch.subscribe(kick, try_to_connect=True)
        ch.unsubscribe(kick)
        with self.cond:
            return self.cond.wait_for(lambda: self.state == grpc.ChannelConnectivity.READY, timeout)


@dataclasses.dataclass
class _Outcome:
    """Whether some attempt of a call may have written."""

    maybe: bool = False


class _NotSent(grpc.RpcError):
    """The connection to addr never became ready: nothing was sent."""

    def __init__(self, addr: str) -> None:
        super().__init__(f"{addr}: connection not ready")
        self._addr = addr

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return f"no connection to {self._addr} (nothing sent)"

    def trailing_metadata(self):
        return ()


def _request(slices: Mapping[str, Sequence[bytes]], expect: Optional[Mapping[str, int]],
             key: Optional[bytes]) -> pb.AppendRequest:
    """The AppendRequest of one transaction: topics in sorted order."""
    if not slices:
        raise ValueError("logplayer: a transaction needs at least one topic")
    req = pb.AppendRequest()
    for topic in sorted(slices):
        values = slices[topic]
        if isinstance(values, (bytes, bytearray, str)):
            raise TypeError(f"logplayer: topic {topic!r}: want a list of bytes, got one value")
        sl = req.slices.add(topic=topic)
        for v in values:
            if isinstance(v, str):
                v = v.encode()
            sl.messages.add(value=bytes(v), key=key or b"")
    for topic in sorted(expect or {}):
        req.conditions.add(topic=topic, expected_next_offset=expect[topic])
    return req


# MAX_PRODUCER_IN_FLIGHT is the cluster's window of remembered results per
# producer (docs/PRODUCER-PROTOCOL.md §4, Go's client.MaxProducerInFlight):
# a producer never has more sequences unanswered than the cluster can
# answer a retry of.
MAX_PRODUCER_IN_FLIGHT = 5


@dataclasses.dataclass(eq=False)
class _Registration:
    """One InitProducer answer."""

    id: str
    epoch: int


@dataclasses.dataclass(eq=False)
class _Flight:
    """One transaction the producer sends; its request carries reg's fields."""

    req: pb.AppendRequest
    reg: Optional[_Registration] = None
    maybe: bool = False  # some attempt may have committed
    lost: bool = False  # maybe, and the cluster forgot reg
    resolving: bool = False  # sent by resolve()
    # started is set when the request was first handed to the connection:
    # its successor waits for it, so the requests leave in sequence order
    # and few are refused as gaps.
    started: threading.Event = dataclasses.field(default_factory=threading.Event)
    after: int = 0  # the producer's last LSN when it was assigned
    attempt: Optional[_Attempt] = None  # the last failed attempt (in doubt)


class _Deadline(Exception):
    """The caller's deadline passed while waiting (internal)."""


class Producer:
    """A registered producer: appends each transaction exactly once.

    Made by :meth:`Client.producer`. On first use it registers its name
    (InitProducer) and numbers its transactions 1, 2, 3, …; it resends a
    transaction with its sequence until the cluster answers, so a retry
    after a lost answer or a leader change returns the first result
    instead of writing again (docs/PRODUCER-PROTOCOL.md §4).

    Up to ``max_in_flight`` (at most 5, the cluster's window) appends from
    concurrent threads are sent without waiting for the earlier ones'
    answers; the cluster applies a producer's sequences in order (one that
    arrives before its predecessor is refused as a gap and resent once the
    predecessor was answered), so the log holds them in the order their
    sequences were assigned. A sequence that will never be written while
    later ones were handed out (a hole) makes the producer register again
    (a new epoch fences what is still on the network) and resend the later
    ones under the new registration.

    States: ready; in doubt (an append raised :class:`InDoubt`: the next
    append raises it again until :meth:`resolve` settled every one); fenced
    (:class:`ProducerFenced`) or broken (:class:`ProducerBroken`): every
    call raises that error.
    """

    def __init__(self, client: Client, name: str, max_in_flight: int = MAX_PRODUCER_IN_FLIGHT) -> None:
        if not name or len(name.encode()) > MAX_NAME_BYTES:
            raise ValueError(f"logplayer: producer name must be 1..{MAX_NAME_BYTES} bytes")
        if not 1 <= max_in_flight <= MAX_PRODUCER_IN_FLIGHT:
            raise ValueError(f"logplayer: max_in_flight {max_in_flight}, want 1..{MAX_PRODUCER_IN_FLIGHT}")
        self.client = client
        self.name = name
        self._window = max_in_flight
        # Everything below is guarded by _cv; waiters wake on every change.
        self._cv = threading.Condition()
        self._reg: Optional[_Registration] = None  # None: register before the next send
        self._registering = False
        self._next = 1  # the next sequence of _reg
        # _hole: the lowest sequence of _reg that will never be written
        # although later ones were handed out (0: none).
        self._hole = 0
        self._live: List[_Flight] = []  # sent, not settled
        self._pending: List[_Flight] = []  # in doubt, in sequence order
        self._broken: Optional[LogPlayerError] = None
        self._last_lsn = 0
        self._changes = 0  # _notify calls

    @property
    def registered(self) -> tuple[Optional[str], int]:
        """(id, epoch) the cluster gave this producer (``(None, 0)`` before)."""
        with self._cv:
            return (self._reg.id, self._reg.epoch) if self._reg is not None else (None, 0)

    def append(self, slices: Mapping[str, Sequence[bytes]], expect: Optional[Mapping[str, int]] = None,
               key: Optional[bytes] = None, timeout: Optional[float] = None) -> int:
        """Commits one transaction exactly once and returns its LSN. Safe to
        call from several threads: up to ``max_in_flight`` are pipelined.

        Args:
            slices: topic → the message values to append to it (all topics
                or none).
            expect: topic → the next offset the topic must have at apply
                time (optimistic concurrency); else :class:`ConditionFailed`.
            key: the key of every message (default none).
            timeout: deadline of the call, retries included (default the
                client's).

        Raises:
            ConditionFailed: a condition did not hold; nothing written.
            NotWritten: refused (invalid, not permitted, …) or no node
                answered; nothing written.
            InDoubt: it may have committed; call :meth:`resolve`.
            ProducerFenced: a newer instance took the name; stop.
            ProducerBroken: the producer is unusable; make a new one.
        """
        f = _Flight(_request(slices, expect, key))
        deadline = time.monotonic() + (timeout if timeout is not None else self.client.timeout)
        self._assign(f, deadline)
        return self._run(f, deadline)

    def resolve(self, timeout: Optional[float] = None) -> Optional[int]:
        """Sends the in-doubt transactions again, in sequence order, each with
        its sequence, and returns the last one's LSN (whether this call or an
        earlier one committed it), or ``None`` when nothing is in doubt.
        Raises as :meth:`append`; what it did not settle stays in doubt."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.client.timeout)
        lsn: Optional[int] = None
        while True:
            with self._cv:
                if self._broken is not None:
                    raise self._broken
                if not self._pending:
                    return lsn
                f = self._pending.pop(0)
                f.resolving, f.started = True, threading.Event()
                self._live.append(f)
                self._notify()
            lsn = self._run(f, deadline)

    # --- internals (the *_locked methods expect _cv held) ---

    def _notify(self) -> None:
        self._changes += 1
        self._cv.notify_all()

    def _wait_locked(self, deadline: float) -> None:
        """Waits for the next change; raises _Deadline when deadline passed."""
        left = deadline - time.monotonic()
        if left <= 0 or not self._cv.wait(left):
            raise _Deadline()

    def _in_doubt(self, f: _Flight, why: str) -> InDoubt:
        a, req = f.attempt, f.req
        fields = a.fields() if a is not None else {}
        return InDoubt(f"logplayer: producer {self.name!r} (id {req.producer_id} epoch {req.producer_epoch}) "
                       f"sequence {req.sequence}: {why}" + (f": {a.message()}" if a else ""),
                       producer_id=req.producer_id, epoch=req.producer_epoch, sequence=req.sequence,
                       lost=f.lost, after_lsn=f.after, **fields)

    def _assign(self, f: _Flight, deadline: float) -> None:
        """Gives f the next sequence of the current registration, registering
        first when there is none (first use, the cluster forgot the
        producer, or a hole). Raises when nothing of f can be sent."""
        with self._cv:
            while True:
                if self._broken is not None:
                    raise self._broken
                if self._pending:
                    raise self._in_doubt(self._pending[0], "an earlier transaction is in doubt; resolve() it first")
                if self._reg is not None and self._hole == 0 and not self._window_full_locked():
                    f.reg, f.maybe, f.lost, f.after, f.attempt = self._reg, False, False, self._last_lsn, None
                    f.req.producer_id, f.req.producer_epoch, f.req.sequence = self._reg.id, self._reg.epoch, self._next
                    f.started = threading.Event()
                    self._next += 1
                    self._live.append(f)
                    return
                if (self._reg is not None and self._hole == 0) or self._registering or self._live:
                    # The window is full, or what was sent under the old
                    # registration must settle first (a new epoch fences it).
                    try:
                        self._wait_locked(deadline)
                    except _Deadline:
                        raise NotWritten(f"logplayer: producer {self.name!r}: deadline passed waiting to send "
                                         "(nothing sent)") from None
                    continue
                self._registering = True
                self._cv.release()
                try:
                    rid, epoch = self.client.init_producer(self.name)
                except LogPlayerError as e:
                    raise NotWritten(f"{e} (nothing sent)", **_fields_of(e)) from None
                finally:
                    self._cv.acquire()
                    self._registering = False
                    self._notify()
                self._reg, self._next, self._hole = _Registration(rid, epoch), 1, 0

    def _window_full_locked(self) -> bool:
        """Whether the next sequence would push the oldest unanswered one of
        the registration out of the cluster's window of remembered results."""
        return any(g.reg is self._reg and self._next >= g.req.sequence + self._window for g in self._live)

    def _settle_locked(self, f: _Flight) -> None:
        f.started.set()  # a successor waiting for f's first send goes on
        if f in self._live:
            self._live.remove(f)
        self._notify()

    def _doubt_locked(self, f: _Flight, why: str) -> InDoubt:
        """Settles f as in doubt (kept for resolve) and returns its error."""
        self._settle_locked(f)
        err = self._in_doubt(f, why)
        if f.lost and f.resolving:
            return err  # settled: its outcome cannot be learned
        i = 0
        while i < len(self._pending) and self._pending[i].req.sequence < f.req.sequence:
            i += 1
        self._pending.insert(i, f)
        return err

    def _unused_locked(self, f: _Flight) -> None:
        """Settles f as never written: its sequence is free again when it was
        the last one handed out, else it is a hole."""
        self._settle_locked(f)
        if f.reg is not self._reg:
            return
        if f.req.sequence == self._next - 1:
            self._next -= 1
        elif self._hole == 0 or f.req.sequence < self._hole:
            self._hole = f.req.sequence

    def _blocked_locked(self, f: _Flight) -> str:
        """Why f, refused as a gap, cannot be applied under its registration
        any more ("" while it may be once the earlier flights are answered)."""
        if f.reg is not self._reg:
            return "registration replaced"
        if self._hole and self._hole < f.req.sequence:
            return "hole"
        if any(d.reg is f.reg and d.req.sequence < f.req.sequence for d in self._pending):
            return "earlier in doubt"
        return ""

    def _give_up_locked(self, f: _Flight, a: _Attempt) -> LogPlayerError:
        """Settles f after its last attempt failed: in doubt when an attempt
        may have committed, else unused (the error to raise)."""
        if f.maybe:
            return self._doubt_locked(f, "outcome unknown, call resolve()")
        self._unused_locked(f)
        cls = Unavailable if a.transient else NotWritten
        return cls(f"logplayer: append: {a.message()}", **a.fields())

    def _send_once(self, f: _Flight, deadline: float) -> pb.AppendResponse:
        """Sends f's request until the cluster answers (retrying what is safe
        to retry) or the deadline passes; raises the last _Attempt."""
        with self._cv:
            prev = next((g.started for g in self._live
                         if g.reg is f.reg and g.req.sequence + 1 == f.req.sequence), None)
        if prev is not None:
            prev.wait(max(0.0, deadline - time.monotonic()))

        def send(stub: pb_grpc.LogStoreStub, t: float) -> pb.AppendResponse:
            f.started.set()
            return stub.Append(f.req, timeout=t)

        out = _Outcome(f.maybe)
        try:
            return self.client._call(send, leader=True, retry_maybe=True,
                                     timeout=max(0.001, deadline - time.monotonic()), outcome=out)
        finally:
            f.maybe = f.maybe or out.maybe

    def _run(self, f: _Flight, deadline: float) -> int:
        """Sends f until it is settled and returns its LSN or raises."""
        while True:
            with self._cv:
                start = self._changes
            before = f.maybe
            try:
                resp = self._send_once(f, deadline)
            except _Attempt as a:
                f.maybe = f.maybe or a.applied != Applied.NO
                f.attempt = a
                if self._failed(f, a, start, deadline):
                    continue
                raise AssertionError("unreachable: _failed raises or asks to resend")  # pragma: no cover
            with self._cv:
                self._last_lsn = max(self._last_lsn, resp.lsn)
                self._settle_locked(f)
                if resp.duplicate and not before and not f.maybe:
                    self._broken = ProducerBroken(
                        f"logplayer: producer {self.name!r} sequence {f.req.sequence} was already committed by "
                        "another producer with the same id", applied=Applied.NO)
                    raise self._broken
                return resp.lsn

    def _failed(self, f: _Flight, a: _Attempt, start: int, deadline: float) -> bool:
        """Handles f's failed attempt a: True to send f again, else raises."""
        req, code = f.req, (a.detail.code if a.detail is not None else None)
        reassign = False
        with self._cv:
            if code == pb.CONDITION_FAILED:  # the sequence is used up
                self._settle_locked(f)
                raise ConditionFailed(f"logplayer: condition failed: {a.message()}", topic=a.detail.topic,
                                      actual=a.detail.actual_next_offset, **a.fields()) from None
            if code == pb.PRODUCER_FENCED:
                self._settle_locked(f)
                if self._broken is None:
                    self._broken = ProducerFenced(
                        f"logplayer: producer {self.name!r} epoch {req.producer_epoch} fenced by epoch "
                        f"{a.detail.epoch} (another instance registered the name): stop this one"
                        + (f"; sequence {req.sequence} may have committed" if f.maybe else ""),
                        current=a.detail.epoch, applied=Applied.MAYBE if f.maybe else Applied.NO, **a.fields())
                raise self._broken from None
            if code == pb.UNKNOWN_PRODUCER:
                if self._reg is f.reg:
                    self._reg = None  # register again before the next send
                if f.maybe:
                    f.lost = True
                    raise self._doubt_locked(f, "outcome unknown and the cluster forgot the producer "
                                                "(look for it in the log)") from None
                self._settle_locked(f)  # nothing written: send it under the new registration
                reassign = True
            elif code == pb.SEQUENCE_MISMATCH and a.detail.expected_sequence < req.sequence:
                # A gap: an earlier sequence has not been applied (yet).
                why = self._blocked_locked(f)
                if why:
                    if f.maybe and why != "hole":
                        f.lost = why == "registration replaced"
                        raise self._doubt_locked(f, "outcome unknown, call resolve()") from None
                    self._unused_locked(f)
                    if why == "earlier in doubt":
                        raise self._in_doubt(self._pending[0], "an earlier transaction is in doubt; resolve() it "
                                                               "first (this one was not written)") from None
                    reassign = True  # never written: send it under a new registration
                elif self._changes == start:  # wait for an earlier flight's answer
                    try:
                        self._wait_locked(deadline)
                    except _Deadline:
                        raise self._give_up_locked(f, a) from None
            elif code in (pb.SEQUENCE_REUSED, pb.SEQUENCE_TOO_OLD, pb.SEQUENCE_MISMATCH):
                self._settle_locked(f)
                self._broken = ProducerBroken(
                    f"logplayer: producer {self.name!r} sequence {req.sequence} refused: {a.message()}"
                    " (the producer is unusable; make a new one)",
                    applied=Applied.MAYBE if f.maybe else Applied.NO, **a.fields())
                raise self._broken from None
            else:
                # Any other refusal says only that the last attempt wrote
                # nothing: an earlier one may have committed (f.maybe).
                raise self._give_up_locked(f, a) from None
        if reassign:
            self._assign(f, deadline)
        return True


def _fields_of(e: LogPlayerError) -> dict:
    return {"code": e.code, "grpc_code": e.grpc_code, "detail": e.detail}
