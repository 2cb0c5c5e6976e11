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

    def producer(self, name: Optional[str] = None) -> "Producer":
        """A registered producer called ``name`` (default: a random name).

        It registers on first use; registering a name fences every older
        instance of it (they get :class:`ProducerFenced`)."""
        return Producer(self, name or "p-" + "".join(random.choice("0123456789abcdef") for _ in range(32)))

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


class Producer:
    """A registered producer: appends each transaction exactly once.

    Made by :meth:`Client.producer`. On first use it registers its name
    (InitProducer) and numbers its transactions 1, 2, 3, …; it resends a
    transaction with its sequence until the cluster answers, so a retry
    after a lost answer or a leader change returns the first result
    instead of writing again (docs/PRODUCER-PROTOCOL.md §4). One
    transaction in flight at a time (calls are serialised by a lock), so
    the 5-in-flight window is never reached.

    States: ready; in doubt (an append raised :class:`InDoubt`: the next
    append raises it again until :meth:`resolve` settles it); fenced
    (:class:`ProducerFenced`) or broken (:class:`ProducerBroken`): every
    call raises that error.
    """

    def __init__(self, client: Client, name: str) -> None:
        if not name or len(name.encode()) > MAX_NAME_BYTES:
            raise ValueError(f"logplayer: producer name must be 1..{MAX_NAME_BYTES} bytes")
        self.client = client
        self.name = name
        self._lock = threading.Lock()
        self._id: Optional[str] = None
        self._epoch = 0
        self._next = 1
        self._last_lsn = 0
        self._pending: Optional[pb.AppendRequest] = None  # the in-doubt transaction
        self._broken: Optional[LogPlayerError] = None

    @property
    def registered(self) -> tuple[Optional[str], int]:
        """(id, epoch) the cluster gave this producer (``(None, 0)`` before)."""
        return self._id, self._epoch

    def append(self, slices: Mapping[str, Sequence[bytes]], expect: Optional[Mapping[str, int]] = None,
               key: Optional[bytes] = None, timeout: Optional[float] = None) -> int:
        """Commits one transaction exactly once and returns its LSN.

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
        req = _request(slices, expect, key)
        with self._lock:
            if self._broken is not None:
                raise self._broken
            if self._pending is not None:
                raise self._in_doubt(self._pending, "an earlier transaction is in doubt; resolve() it first", None)
            return self._run(req, False, timeout)

    def resolve(self, timeout: Optional[float] = None) -> Optional[int]:
        """Sends the in-doubt transaction again with its sequence and returns
        its LSN (whether this call or an earlier one committed it), or
        ``None`` when nothing is in doubt. Raises as :meth:`append`."""
        with self._lock:
            if self._broken is not None:
                raise self._broken
            req, self._pending = self._pending, None
            if req is None:
                return None
            return self._run(req, True, timeout)

    def _register(self) -> None:
        self._id, self._epoch = self.client.init_producer(self.name)
        self._next = 1

    def _in_doubt(self, req: pb.AppendRequest, why: str, a: Optional[_Attempt], lost: bool = False) -> InDoubt:
        fields = a.fields() if a is not None else {}
        return InDoubt(f"logplayer: producer {self.name!r} (id {req.producer_id} epoch {req.producer_epoch}) "
                       f"sequence {req.sequence}: {why}" + (f": {a.message()}" if a else ""),
                       producer_id=req.producer_id, epoch=req.producer_epoch, sequence=req.sequence,
                       lost=lost, after_lsn=self._last_lsn, **fields)

    def _run(self, req: pb.AppendRequest, maybe: bool, timeout: Optional[float]) -> int:
        """Sends req until it is settled (the lock is held)."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.client.timeout)
        if not req.producer_id:
            if self._id is None:
                try:
                    self._register()
                except LogPlayerError as e:
                    raise NotWritten(f"{e} (nothing sent)", **_fields_of(e)) from None
            req.producer_id, req.producer_epoch, req.sequence = self._id, self._epoch, self._next
        while True:
            left = max(0.001, deadline - time.monotonic())
            out = _Outcome(maybe)
            try:
                resp = self.client._call(lambda s, t: s.Append(req, timeout=t), leader=True, retry_maybe=True,
                                         timeout=left, outcome=out)
            except _Attempt as a:
                maybe = maybe or out.maybe or a.applied != Applied.NO
                code = a.detail.code if a.detail is not None else None
                if code == pb.CONDITION_FAILED:  # the sequence is used up
                    self._next = req.sequence + 1
                    raise ConditionFailed(f"logplayer: condition failed: {a.message()}", topic=a.detail.topic,
                                          actual=a.detail.actual_next_offset, **a.fields()) from None
                if code == pb.PRODUCER_FENCED:
                    self._broken = ProducerFenced(
                        f"logplayer: producer {self.name!r} epoch {req.producer_epoch} fenced by epoch "
                        f"{a.detail.epoch} (another instance registered the name): stop this one"
                        + (f"; sequence {req.sequence} may have committed" if maybe else ""),
                        current=a.detail.epoch, applied=Applied.MAYBE if maybe else Applied.NO, **a.fields())
                    raise self._broken from None
                if code == pb.UNKNOWN_PRODUCER:
                    if req.producer_id == self._id:
                        self._id = None
                    if maybe:
                        raise self._in_doubt(req, "outcome unknown and the cluster forgot the producer "
                                             "(look for it in the log)", a, lost=True) from None
                    try:
                        self._register()
                    except LogPlayerError as e:
                        raise NotWritten(f"{e} (nothing of the transaction was written)", **_fields_of(e)) from None
                    req.producer_id, req.producer_epoch, req.sequence = self._id, self._epoch, self._next
                    continue
                if code in (pb.SEQUENCE_REUSED, pb.SEQUENCE_TOO_OLD, pb.SEQUENCE_MISMATCH):
                    self._broken = ProducerBroken(
                        f"logplayer: producer {self.name!r} sequence {req.sequence} refused: {a.message()}"
                        " (the producer is unusable; make a new one)",
                        applied=Applied.MAYBE if maybe else Applied.NO, **a.fields())
                    raise self._broken from None
                if maybe:
                    self._pending = req
                    raise self._in_doubt(req, "outcome unknown, call resolve()", a) from None
                # Nothing written: the sequence is free for the next transaction.
                cls = Unavailable if a.transient else NotWritten
                raise cls(f"logplayer: append: {a.message()}", **a.fields()) from None
            maybe = maybe or out.maybe
            if resp.duplicate and not maybe:
                self._broken = ProducerBroken(
                    f"logplayer: producer {self.name!r} sequence {req.sequence} was already committed by another "
                    "producer with the same id", applied=Applied.NO)
                raise self._broken
            self._next = req.sequence + 1
            self._last_lsn = max(self._last_lsn, resp.lsn)
            return resp.lsn


def _fields_of(e: LogPlayerError) -> dict:
    return {"code": e.code, "grpc_code": e.grpc_code, "detail": e.detail}
