"""logplayer.target against docs/TARGET-PROTOCOL.md, driven by a raw Deliver client (no cluster)."""

from __future__ import annotations

import queue
import threading
import time
import unittest
from typing import List, Optional

import devcluster  # noqa: F401 - puts the SDK on sys.path
import grpc

from logplayer import Applied, target
from logplayer._pb import logstore_pb2 as lpb
from logplayer._pb import target_pb2 as tpb
from logplayer._pb import target_pb2_grpc as tpb_grpc
from logplayer.errors import applied_of, detail_of


class MemStore:
    """A store in memory; fail_at makes apply raise permanent() at that LSN."""

    def __init__(self) -> None:
        self.st = target.State()
        self.applied: List[int] = []
        self.fail_at: Optional[int] = None

    def state(self) -> target.State:
        return self.st.clone()

    def apply(self, deliveries, next_state) -> None:
        for d in deliveries:
            if d.lsn == self.fail_at:
                raise target.permanent(d.lsn, "malformed")
        self.applied += [d.lsn for d in deliveries]
        self.st = next_state


def hello(epoch: int, session: int = 1, target_id: str = "t1") -> tpb.DeliverRequest:
    return tpb.DeliverRequest(hello=tpb.Hello(player_id="test", epoch=epoch, target_id=target_id,
                                              protocol_version=tpb.PROTOCOL_VERSION_1, session=session))


def batch(*ds: tpb.Delivery) -> tpb.DeliverRequest:
    return tpb.DeliverRequest(batch=tpb.Batch(deliveries=list(ds)))


def delivery(lsn: int, topic: str = "", first: int = 0, n: int = 1) -> tpb.Delivery:
    d = tpb.Delivery(lsn=lsn)
    if topic:
        d.slices.add(topic=topic, first_offset=first, messages=[lpb.Message(value=b"v")] * n)
    return d


class Stream:
    """One Deliver call whose requests the test sends one by one."""

    def __init__(self, stub: tpb_grpc.TargetStub) -> None:
        self.q: "queue.Queue[Optional[tpb.DeliverRequest]]" = queue.Queue()
        self.resp = stub.Deliver(iter(self.q.get, None), timeout=30)

    def send(self, req: tpb.DeliverRequest) -> tpb.DeliverResponse:
        self.q.put(req)
        return next(self.resp)

    def refused(self, req: tpb.DeliverRequest) -> grpc.RpcError:
        self.q.put(req)
        try:
            for _ in self.resp:
                pass
        except grpc.RpcError as e:
            return e
        raise AssertionError("stream ended without a refusal")

    def close(self) -> None:
        self.q.put(None)


class TargetProtocolTest(unittest.TestCase):
    def setUp(self) -> None:
        self.store = MemStore()
        self.srv = target.serve(self.store, "127.0.0.1:0", "t1", topics=["a", "b"])
        self.ch = grpc.insecure_channel("127.0.0.1:%d" % self.srv.port)
        self.stub = tpb_grpc.TargetStub(self.ch)

    def tearDown(self) -> None:
        self.ch.close()
        self.srv.stop(0)

    def assertRefusal(self, err: grpc.RpcError, grpc_code: grpc.StatusCode, code: int) -> lpb.ErrorDetail:
        d = detail_of(err)
        self.assertIsNotNone(d, err)
        self.assertEqual((err.code(), lpb.ErrorCode.Name(d.code)), (grpc_code, lpb.ErrorCode.Name(code)))
        self.assertEqual(applied_of(err), Applied.NO)
        return d

    def test_deliver_ack_and_recover(self) -> None:
        s = Stream(self.stub)
        ack = s.send(hello(5)).hello_ack
        self.assertEqual((ack.applied_lsn, ack.protocol_version), (0, tpb.PROTOCOL_VERSION_1))
        self.assertEqual(self.store.st.epoch, 5, "the epoch is stored before the HelloAck")
        self.assertEqual(s.send(batch(delivery(3, "a", 0, 2), delivery(4))).ack.applied_lsn, 4)
        self.assertEqual(s.send(batch(delivery(7, "b", 0), delivery(8, "a", 2))).ack.applied_lsn, 8)
        s.close()
        self.assertEqual(self.store.applied, [3, 4, 7, 8])
        ack = Stream(self.stub).send(hello(5, session=2)).hello_ack
        self.assertEqual(ack.applied_lsn, 8)
        self.assertEqual([(t.topic, t.next_offset) for t in ack.topics], [("a", 3), ("b", 1)])

    def test_refusals(self) -> None:
        Stream(self.stub).send(hello(5, session=3))
        d = self.assertRefusal(Stream(self.stub).refused(hello(4)), grpc.StatusCode.FAILED_PRECONDITION,
                               lpb.STALE_EPOCH)
        self.assertEqual(d.epoch, 5)
        self.assertRefusal(Stream(self.stub).refused(hello(5, session=2)), grpc.StatusCode.ABORTED, lpb.SUPERSEDED)
        self.assertRefusal(Stream(self.stub).refused(hello(6, target_id="t2")), grpc.StatusCode.INVALID_ARGUMENT,
                           lpb.WRONG_TARGET)
        s = Stream(self.stub)
        s.send(hello(6))
        d = self.assertRefusal(s.refused(batch(delivery(2, "a", 1))), grpc.StatusCode.ABORTED, lpb.CONTINUITY)
        self.assertEqual((d.topic, d.actual_next_offset), ("a", 0))
        s = Stream(self.stub)
        s.send(hello(6, session=2))
        d = self.assertRefusal(s.refused(batch(delivery(2, "c", 0))), grpc.StatusCode.DATA_LOSS, lpb.APPLY_REJECTED)
        self.assertEqual(d.topic, "c")
        self.store.fail_at = 9
        s = Stream(self.stub)
        s.send(hello(6, session=3))
        self.assertEqual(s.send(batch(delivery(8, "a", 0))).ack.applied_lsn, 8)
        d = self.assertRefusal(s.refused(batch(delivery(9, "a", 1))), grpc.StatusCode.DATA_LOSS, lpb.APPLY_REJECTED)
        self.assertEqual(d.lsn, 9)
        self.assertEqual(self.store.applied, [8], "nothing of a refused batch is applied")

    def test_newer_stream_takes_over(self) -> None:
        old = Stream(self.stub)
        old.send(hello(5))
        new = Stream(self.stub)
        new.send(hello(6))
        self.assertRefusal(old.refused(batch(delivery(1, "a", 0))), grpc.StatusCode.FAILED_PRECONDITION,
                           lpb.STALE_EPOCH)
        self.assertEqual(self.store.applied, [], "an overtaken stream's batch is never applied")
        self.assertEqual(new.send(batch(delivery(1, "a", 0))).ack.applied_lsn, 1)
        new.close()

    def test_group_commit(self) -> None:
        """The batches received while an apply runs go to the store in one apply."""
        entered, release = threading.Event(), threading.Event()
        calls: List[List[int]] = []
        orig = self.store.apply

        def apply(deliveries, next_state) -> None:
            calls.append([d.lsn for d in deliveries])
            if deliveries and deliveries[0].lsn == 1:
                entered.set()
                release.wait(30)
            orig(deliveries, next_state)

        self.store.apply = apply
        s = Stream(self.stub)
        s.send(hello(5))
        calls.clear()  # the Hello's epoch write
        s.q.put(batch(delivery(1, "a", 0)))
        self.assertTrue(entered.wait(30), "the first batch was not applied")
        s.q.put(batch(delivery(2, "a", 1)))
        s.q.put(batch(delivery(3, "b", 0), delivery(4)))
        deadline = time.monotonic() + 30
        while self.srv.received < 4:  # the Hello and 3 batches, queued behind the running apply
            self.assertLess(time.monotonic(), deadline, "the reader did not queue the batches")
            time.sleep(0.01)
        release.set()
        acks = [next(s.resp).ack.applied_lsn for _ in range(2)]
        s.close()
        self.assertEqual(acks, [1, 4])
        self.assertEqual(calls, [[1], [2, 3, 4]], "one apply for the batches queued behind the first")
        self.assertEqual(self.store.applied, [1, 2, 3, 4])

    def test_group_commit_refusal_applies_what_came_before(self) -> None:
        """A group whose store apply fails permanently is applied batch by batch:
        the batches before the bad one are applied and acknowledged."""
        srv = target.serve(self.store, "127.0.0.1:0", "t2", max_group_deliveries=10)
        self.addCleanup(srv.stop, 0)
        ch = grpc.insecure_channel("127.0.0.1:%d" % srv.port)
        self.addCleanup(ch.close)
        entered, release = threading.Event(), threading.Event()
        orig = self.store.apply

        def apply(deliveries, next_state) -> None:
            if deliveries and deliveries[0].lsn == 1:
                entered.set()
                release.wait(30)
            orig(deliveries, next_state)

        self.store.apply, self.store.fail_at = apply, 3
        s = Stream(tpb_grpc.TargetStub(ch))
        s.send(hello(5, target_id="t2"))
        s.q.put(batch(delivery(1, "a", 0)))
        self.assertTrue(entered.wait(30))
        s.q.put(batch(delivery(2, "a", 1)))
        s.q.put(batch(delivery(3, "a", 2)))
        deadline = time.monotonic() + 30
        while srv.received < 4:
            self.assertLess(time.monotonic(), deadline, "the reader did not queue the batches")
            time.sleep(0.01)
        release.set()
        err = s.refused(batch(delivery(4, "a", 3)))
        d = self.assertRefusal(err, grpc.StatusCode.DATA_LOSS, lpb.APPLY_REJECTED)
        self.assertEqual(d.lsn, 3)
        self.assertEqual(self.store.applied, [1, 2], "the batch before the bad one is applied")

    def test_hello_timeout(self) -> None:
        srv = target.serve(self.store, "127.0.0.1:0", "t1", hello_timeout=0.3)
        self.addCleanup(srv.stop, 0)
        ch = grpc.insecure_channel("127.0.0.1:%d" % srv.port)
        self.addCleanup(ch.close)
        s = Stream(tpb_grpc.TargetStub(ch))
        try:
            next(s.resp)
        except grpc.RpcError as e:
            d = self.assertRefusal(e, grpc.StatusCode.DEADLINE_EXCEEDED, lpb.UNKNOWN_OUTCOME)
            self.assertIn("no Hello within", e.details())
        else:
            raise AssertionError("a stream without a Hello was not refused")
        finally:
            s.close()


if __name__ == "__main__":
    unittest.main()
