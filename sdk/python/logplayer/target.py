"""Make a Python program an exactly-once LogPlayer delivery target.

Written from docs/TARGET-PROTOCOL.md. The application implements a store
with two methods (the contract of Go's ``target.Store``)::

    class MyStore:
        def state(self) -> logplayer.target.State: ...
        def apply(self, deliveries, next_state) -> None: ...

``state()`` returns the durable :class:`State` (what a restart would find).
``apply(deliveries, next_state)`` applies the deliveries and records
``next_state`` in ONE local atomic durable transaction: when it returns,
both survive a crash; when it raises, neither may have been applied.

The SDK has already checked continuity when it calls ``apply``: the
deliveries (``target_pb2.Delivery`` messages: ``.lsn``,
``.timestamp_unix_nano``, ``.slices`` of ``.topic``, ``.first_offset``,
``.messages`` with ``.value``, ``.key``, ``.headers``) have strictly
increasing LSNs above ``state().applied_lsn``; each slice starts at its
topic's next offset; ``next_state.applied_lsn`` is the last delivery's
LSN. A delivery with no slices is a progress marker (nothing to write but
its LSN). ``deliveries`` may be empty: then only ``next_state.epoch``
changed and must be stored (epoch fencing survives restarts).
``next_state.topics`` is the complete map. The SDK calls the store from
one thread at a time.

Raise :func:`permanent` (a :class:`PermanentError`) from ``apply`` when a
delivery can never be applied (a malformed payload): the LogPlayer is told
APPLY_REJECTED with its LSN and stops delivering to this target. Any other
exception is transient: the SDK reloads ``state()`` and the LogPlayer
reconnects.

Group commit, as the Go SDK: a reader thread per stream queues the
batches the LogPlayer sends (at most ``QUEUE_BATCHES``; then gRPC flow
control pushes back), and the batches queued while an ``apply`` ran go to
the store in the next ``apply`` call together (at most
``max_group_deliveries`` deliveries and ``max_group_bytes`` encoded
bytes), acknowledged by one cumulative Ack. A stream that sends no Hello
within ``hello_timeout`` seconds is refused (UNKNOWN_OUTCOME, nothing
applied).

Difference from the Go SDK: a stream overtaken by a newer one is ended
when it next sends a batch (its batches are never applied).
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import uuid
from concurrent import futures
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Protocol, Union

import grpc

from ._pb import logstore_pb2 as lpb
from ._pb import target_pb2 as tpb
from ._pb import target_pb2_grpc as tpb_grpc
from .errors import encode_status_details

__all__ = ["State", "Store", "PermanentError", "permanent", "serve", "Server"]

log = logging.getLogger("logplayer.target")

PemSource = Union[str, bytes, Path, None]

# Defaults of serve(), as Go's target.Config.
HELLO_TIMEOUT = 30.0  # seconds a new stream may take to send its Hello
MAX_GROUP_DELIVERIES = 4096  # deliveries of one group commit (one apply call)
MAX_GROUP_BYTES = 16 << 20  # encoded batch bytes of one group commit
# QUEUE_BATCHES bounds a stream's queue of received batches: more than the
# LogPlayer's in-flight window (32 batches), so the next group is ready when
# an apply returns; when full the reader stops reading and gRPC flow control
# pushes back on the LogPlayer.
QUEUE_BATCHES = 64


@dataclasses.dataclass
class State:
    """A target's durable delivery position, stored with its data.

    Attributes:
        applied_lsn: every delivery with an LSN <= it is applied (0: none).
        epoch: the highest LogPlayer epoch that opened a stream (0: none).
        topics: topic -> the next offset expected (topics never seen absent).
    """

    applied_lsn: int = 0
    epoch: int = 0
    topics: Dict[str, int] = dataclasses.field(default_factory=dict)

    def clone(self) -> "State":
        """A copy whose topics map is not shared."""
        return State(self.applied_lsn, self.epoch, dict(self.topics))


class Store(Protocol):
    """What an application implements to become a target."""

    def state(self) -> State:
        """The durable State."""

    def apply(self, deliveries: List[tpb.Delivery], next_state: State) -> None:
        """Applies deliveries and stores next_state in one atomic durable transaction."""


class PermanentError(Exception):
    """A delivery that can never be applied (raise it with :func:`permanent`)."""

    def __init__(self, lsn: int, cause: object) -> None:
        super().__init__(f"lsn {lsn}: permanent apply failure: {cause}")
        self.lsn = lsn
        self.cause = cause


def permanent(lsn: int, cause: object) -> PermanentError:
    """The error to raise from ``apply`` when the delivery at ``lsn`` can never be applied."""
    return PermanentError(lsn, cause)


class _Refusal(Exception):
    """A refusal: the gRPC status and ErrorDetail the stream ends with."""

    def __init__(self, grpc_code: grpc.StatusCode, code: int, message: str, **detail) -> None:
        super().__init__(message)
        self.grpc_code = grpc_code
        self.detail = lpb.ErrorDetail(code=code, applied=lpb.APPLIED_NO, **detail)

    def abort(self, context: grpc.ServicerContext) -> None:
        context.set_trailing_metadata(
            (("grpc-status-details-bin", encode_status_details(self.grpc_code, str(self), self.detail)),))
        context.abort(self.grpc_code, str(self))


def _invalid(msg: str, **detail) -> _Refusal:
    return _Refusal(grpc.StatusCode.INVALID_ARGUMENT, lpb.INVALID_ARGUMENT, msg, **detail)


class _Stream:
    """One Deliver call."""

    def __init__(self, hello: tpb.Hello) -> None:
        self.hello = hello
        self.ended: Optional[_Refusal] = None  # set when a newer stream took over


class _Servicer(tpb_grpc.TargetServicer):
    """The Target service over a Store (one lock serialises the store)."""

    def __init__(self, store: Store, target_id: str, topics: Optional[Iterable[str]],
                 incarnation_id: str, skip_lsns: Iterable[int], hello_timeout: float = HELLO_TIMEOUT,
                 max_group_deliveries: int = MAX_GROUP_DELIVERIES, max_group_bytes: int = MAX_GROUP_BYTES) -> None:
        self.store = store
        self.hello_timeout = hello_timeout
        self.max_group_deliveries = max_group_deliveries
        self.max_group_bytes = max_group_bytes
        self.target_id = target_id
        self.topics = set(topics) if topics is not None else None
        self.skip = set(skip_lsns)
        self.incarnation_id = incarnation_id
        self.mu = threading.Lock()
        self.st = store.state().clone()
        self.stale = False
        self.session = 0
        self.active: Optional[_Stream] = None
        # received counts the requests the readers queued (Server.received),
        # under its own lock: a reader must not wait for an apply (mu).
        self.received_mu = threading.Lock()
        self.received = 0

    # --- helpers (self.mu held) ---

    def _load(self) -> None:
        if self.stale:
            try:
                self.st = self.store.state().clone()
            except Exception as e:  # noqa: BLE001 - any store failure is INTERNAL
                raise self._store_failure(e) from None
            self.stale = False

    @staticmethod
    def _store_failure(e: BaseException) -> _Refusal:
        return _Refusal(grpc.StatusCode.INTERNAL, lpb.INTERNAL, f"store failure: {e}; reconnect with backoff")

    def _hello_ack(self) -> tpb.HelloAck:
        return tpb.HelloAck(applied_lsn=self.st.applied_lsn, incarnation_id=self.incarnation_id,
                            protocol_version=tpb.PROTOCOL_VERSION_1,
                            topics=[tpb.TopicOffset(topic=t, next_offset=o) for t, o in sorted(self.st.topics.items())])

    def _accept(self, s: _Stream) -> tpb.HelloAck:
        h = s.hello
        if h.protocol_version != tpb.PROTOCOL_VERSION_1:
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, lpb.UNSUPPORTED_PROTOCOL,
                           f"unsupported protocol version {h.protocol_version}; this target speaks 1 only", limit=1)
        if h.target_id != self.target_id:
            raise _Refusal(grpc.StatusCode.INVALID_ARGUMENT, lpb.WRONG_TARGET,
                           f"hello for target {h.target_id!r} reached target {self.target_id!r}")
        if h.epoch == 0:
            raise _invalid("hello with epoch 0; epochs start at 1 (LogStore NextEpoch)")
        with self.mu:
            self._load()
            cur = self.st
            if h.epoch < cur.epoch:
                raise _Refusal(grpc.StatusCode.FAILED_PRECONDITION, lpb.STALE_EPOCH,
                               f"epoch {h.epoch} is below the highest epoch seen {cur.epoch}: "
                               "a newer LogPlayer owns this target", epoch=cur.epoch)
            if h.epoch == cur.epoch and h.session < self.session:
                raise _Refusal(grpc.StatusCode.ABORTED, lpb.SUPERSEDED,
                               f"session {h.session} is below session {self.session} already seen in epoch {h.epoch}",
                               epoch=cur.epoch)
            if h.epoch > cur.epoch:
                nxt = cur.clone()
                nxt.epoch = h.epoch
                try:
                    self.store.apply([], nxt)
                except Exception as e:  # noqa: BLE001
                    self.stale = True
                    raise self._store_failure(e) from None
                self.st = nxt
                log.info("epoch advanced to %d (player %s)", h.epoch, h.player_id)
            self.session = h.session
            old = self.active
            if old is not None and old is not s and old.ended is None:
                if old.hello.epoch < h.epoch:
                    old.ended = _Refusal(grpc.StatusCode.FAILED_PRECONDITION, lpb.STALE_EPOCH,
                                         f"epoch {h.epoch} took over from epoch {old.hello.epoch}", epoch=h.epoch)
                else:
                    old.ended = _Refusal(grpc.StatusCode.ABORTED, lpb.SUPERSEDED,
                                         f"a newer stream (epoch {h.epoch} session {h.session}) took over",
                                         epoch=h.epoch)
            self.active = s
            return self._hello_ack()

    def _advance(self, nxt: State, ds: List[tpb.Delivery]) -> List[tpb.Delivery]:
        """Checks ds against nxt and moves nxt past them (docs/TARGET-PROTOCOL.md §4);
        returns what the store applies (skipped LSNs as progress markers)."""
        out: List[tpb.Delivery] = []
        for d in ds:
            if d.lsn == 0:
                raise _invalid("delivery with lsn 0")
            if d.lsn <= nxt.applied_lsn:
                word = "duplicate" if d.lsn == nxt.applied_lsn else "backwards"
                raise _Refusal(grpc.StatusCode.ABORTED, lpb.CONTINUITY,
                               f"{word} lsn {d.lsn}: not above {nxt.applied_lsn}; reconnect and resync",
                               lsn=d.lsn, applied_lsn=self.st.applied_lsn)
            seen = set()
            for j, sl in enumerate(d.slices):
                if not sl.topic or not sl.messages:
                    raise _invalid(f"lsn {d.lsn}: slice {j} has no topic or no messages", lsn=d.lsn)
                if sl.topic in seen:
                    raise _invalid(f"lsn {d.lsn}: topic {sl.topic!r} appears twice", lsn=d.lsn, topic=sl.topic)
                seen.add(sl.topic)
                if self.topics is not None and sl.topic not in self.topics:
                    raise _Refusal(grpc.StatusCode.DATA_LOSS, lpb.APPLY_REJECTED,
                                   f"lsn {d.lsn}: topic {sl.topic!r} is not served by this target "
                                   "(permanent: fix the LogPlayer's subscriptions)", lsn=d.lsn, topic=sl.topic)
                want = nxt.topics.get(sl.topic, 0 if self.topics is not None else None)
                if want is not None and sl.first_offset != want:
                    word = "gap" if sl.first_offset > want else "overlap"
                    raise _Refusal(grpc.StatusCode.ABORTED, lpb.CONTINUITY,
                                   f"offset {word} at lsn {d.lsn}: topic {sl.topic!r} slice starts at offset "
                                   f"{sl.first_offset}, expected {want}; reconnect and resync",
                                   lsn=d.lsn, applied_lsn=self.st.applied_lsn, topic=sl.topic, actual_next_offset=want)
                nxt.topics[sl.topic] = sl.first_offset + len(sl.messages)
            nxt.applied_lsn = d.lsn
            if d.lsn in self.skip and d.slices:
                log.warning("lsn %d skipped (skip_lsns): its data is dropped", d.lsn)
                out.append(tpb.Delivery(lsn=d.lsn, timestamp_unix_nano=d.timestamp_unix_nano))
            else:
                out.append(d)
        return out

    def _apply(self, s: _Stream, batches: List[tpb.Batch]) -> int:
        """Checks and applies batches of the active stream in one store ``apply``
        (group commit); returns the applied LSN. A batch that fails its checks
        is refused after the batches before it were applied; a permanent store
        failure of a group is retried batch by batch, so the refusal names the
        batch that cannot be applied and the ones before it are applied."""
        with self.mu:
            if s.ended is not None:
                raise s.ended
            if self.active is not s:
                raise _Refusal(grpc.StatusCode.ABORTED, lpb.SUPERSEDED, "a newer stream took over")
            self._load()
            nxt = self.st.clone()
            ds: List[tpb.Delivery] = []
            checked: List[tpb.Batch] = []  # the batches that passed the checks
            refused: Optional[_Refusal] = None
            for b in batches:
                step = nxt.clone()
                try:
                    more = self._advance(step, list(b.deliveries))
                except _Refusal as r:
                    refused = r
                    break
                nxt = step
                ds += more
                checked.append(b)
            try:
                if ds:
                    try:
                        self._store_apply(ds, nxt)
                    except PermanentError:
                        if len(checked) == 1:
                            raise
                        for b in checked:  # apply one by one up to the batch that cannot be
                            one = self.st.clone()
                            self._store_apply(self._advance(one, list(b.deliveries)), one)
            except PermanentError as e:
                raise _Refusal(grpc.StatusCode.DATA_LOSS, lpb.APPLY_REJECTED,
                               f"lsn {e.lsn} cannot be applied ({e.cause}); nothing of its batch was applied. "
                               "Permanent: the LogPlayer must stop delivering to this target", lsn=e.lsn) from None
            if refused is not None:
                raise refused
            return self.st.applied_lsn

    def _store_apply(self, ds: List[tpb.Delivery], nxt: State) -> None:
        """store.apply(ds, nxt), then nxt is the state (self.mu held). A
        PermanentError passes; any other failure is a store failure."""
        try:
            self.store.apply(ds, nxt)
        except PermanentError:
            raise
        except Exception as e:  # noqa: BLE001
            self.stale = True
            raise self._store_failure(e) from None
        self.st = nxt

    def _group(self, q: "queue.Queue[object]", first: tpb.Batch) -> tuple[List[tpb.Batch], object]:
        """first and the batches queued behind it, within the group bounds,
        and the item taken from q but not grouped (None when q ran empty)."""
        group = [first]
        n, size = len(first.deliveries), first.ByteSize()
        while True:
            try:
                item = q.get_nowait()
            except queue.Empty:
                return group, None
            if not isinstance(item, tpb.DeliverRequest) or not item.HasField("batch"):
                return group, item
            b = item.batch
            if n + len(b.deliveries) > self.max_group_deliveries or size + b.ByteSize() > self.max_group_bytes:
                return group, item
            group.append(b)
            n, size = n + len(b.deliveries), size + b.ByteSize()

    # --- the RPC ---

    def Deliver(self, request_iterator: Iterator[tpb.DeliverRequest],
                context: grpc.ServicerContext) -> Iterator[tpb.DeliverResponse]:
        # The reader thread queues what the stream sends: _END at its end, an
        # exception when it broke. Bounded: a full queue stops the reading.
        q: "queue.Queue[object]" = queue.Queue(maxsize=QUEUE_BATCHES)

        def put(item: object) -> bool:
            while True:
                try:
                    q.put(item, timeout=_READER_POLL)
                    return True
                except queue.Full:
                    if not context.is_active():  # the handler is gone
                        return False

        def read() -> None:
            try:
                for req in request_iterator:
                    if not put(req):
                        return
                    with self.received_mu:
                        self.received += 1
                put(_END)
            except Exception as e:  # noqa: BLE001 - the stream broke or was cancelled
                put(e)

        threading.Thread(target=read, name="logplayer-target-reader", daemon=True).start()
        try:
            try:
                first = q.get(timeout=self.hello_timeout)
            except queue.Empty:  # nothing applied: the abort ends the RPC and the reader
                raise _Refusal(grpc.StatusCode.DEADLINE_EXCEEDED, lpb.UNKNOWN_OUTCOME,
                               f"no Hello within {self.hello_timeout:g}s") from None
            if not isinstance(first, tpb.DeliverRequest) or not first.HasField("hello"):
                raise _invalid("first request is not a Hello")
            s = _Stream(first.hello)
            ack = self._accept(s)
            log.info("stream open: player %s epoch %d session %d lsn %d", s.hello.player_id, s.hello.epoch,
                     s.hello.session, ack.applied_lsn)
            yield tpb.DeliverResponse(hello_ack=ack)
            sent = ack.applied_lsn
            item: object = None
            while True:
                if item is None:
                    item = q.get()
                if not isinstance(item, tpb.DeliverRequest):
                    return  # the stream ended (or broke)
                if not item.HasField("batch"):
                    raise _invalid("request after Hello is not a Batch")
                group, item = self._group(q, item.batch)
                lsn = self._apply(s, group)
                if lsn > sent:
                    sent = lsn
                    yield tpb.DeliverResponse(ack=tpb.Ack(applied_lsn=lsn))
        except _Refusal as r:
            log.info("stream refused: %s", r)
            r.abort(context)


# _END is what the reader queues when the stream ended.
_END = object()
# _READER_POLL: how often (seconds) a reader blocked on a full queue checks
# that its RPC is still active.
_READER_POLL = 0.5


class Server:
    """A running target (made by :func:`serve`)."""

    def __init__(self, grpc_server: grpc.Server, port: int, servicer: _Servicer) -> None:
        self._server = grpc_server
        self.port = port
        self._servicer = servicer

    @property
    def state(self) -> State:
        """The state the target last applied (a copy)."""
        with self._servicer.mu:
            return self._servicer.st.clone()

    @property
    def received(self) -> int:
        """How many requests (Hellos and batches) the streams' readers have queued."""
        with self._servicer.received_mu:
            return self._servicer.received

    def stop(self, grace: Optional[float] = None) -> None:
        """Stops serving (open streams end after ``grace`` seconds)."""
        self._server.stop(grace).wait()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the server stops; False when the timeout passed first."""
        return self._server.wait_for_termination(timeout)


def _pem(src: PemSource) -> Optional[bytes]:
    if src is None:
        return None
    if isinstance(src, bytes):
        return src
    return Path(src).read_bytes()


def serve(store: Store, address: str, target_id: str, *, topics: Optional[Iterable[str]] = None,
          cert: PemSource = None, key: PemSource = None, client_ca: PemSource = None,
          incarnation_id: Optional[str] = None, skip_lsns: Iterable[int] = (),
          max_workers: int = 16, hello_timeout: float = HELLO_TIMEOUT,
          max_group_deliveries: int = MAX_GROUP_DELIVERIES, max_group_bytes: int = MAX_GROUP_BYTES) -> Server:
    """Serves the Target service for ``store`` on ``address`` and returns the running :class:`Server`.

    Args:
        store: the application's store (``state()``, ``apply(deliveries, next_state)``).
        address: ``"host:port"`` to listen on (port 0 picks one: see ``Server.port``).
        target_id: this target's id; a Hello naming another is refused (WRONG_TARGET).
        topics: when given, the only topics accepted (each starting at offset 0);
            a delivery of another topic is refused permanently.
        cert, key: serve TLS with this certificate and key (PEM bytes or paths).
        client_ca: also require a client certificate signed by this CA (the
            LogPlayer's): mutual TLS.
        incarnation_id: reported in the HelloAck (default: random, per start).
        skip_lsns: LSNs whose data an operator chose to drop (applied as progress markers).
        max_workers: threads of the gRPC server (one per open stream; each
            stream also has a reader thread of its own).
        hello_timeout: seconds a new stream may take to send its Hello.
        max_group_deliveries, max_group_bytes: bound one group commit (the
            batches queued while an ``apply`` ran, applied in one call).
    """
    if (cert is None) != (key is None):
        raise ValueError("logplayer.target: cert and key go together")
    if client_ca is not None and cert is None:
        raise ValueError("logplayer.target: client_ca needs cert and key")
    if hello_timeout <= 0 or max_group_deliveries < 1 or max_group_bytes < 1:
        raise ValueError("logplayer.target: hello_timeout, max_group_deliveries and max_group_bytes must be positive")
    servicer = _Servicer(store, target_id, topics, incarnation_id or uuid.uuid4().hex, skip_lsns,
                         hello_timeout, max_group_deliveries, max_group_bytes)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers),
                         options=[("grpc.max_receive_message_length", 64 << 20)])
    tpb_grpc.add_TargetServicer_to_server(servicer, server)
    if cert is not None:
        creds = grpc.ssl_server_credentials([(_pem(key), _pem(cert))], root_certificates=_pem(client_ca),
                                            require_client_auth=client_ca is not None)
        port = server.add_secure_port(address, creds)
    else:
        port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"logplayer.target: cannot listen on {address}")
    server.start()
    return Server(server, port, servicer)
