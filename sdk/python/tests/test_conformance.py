"""Conformance of the Python SDK against a real ``logplayer dev`` cluster (TLS on).

Run: ``cd sdk/python && /usr/bin/python3 -m unittest -v`` (CI runs it from
``go test ./sdk/python/``).
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import threading
import unittest
from typing import List, Optional

import devcluster
from devcluster import PYTHON, SDK, Dev, free_port, wait_for

import logplayer

DEV: Optional[Dev] = None


def setUpModule() -> None:
    global DEV
    DEV = Dev()


def tearDownModule() -> None:
    if DEV is not None:
        DEV.stop()


class Proxy:
    """A TCP proxy to one upstream that can swallow the answers and cut its connections."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.lis = socket.create_server(("127.0.0.1", 0))
        self.addr = "127.0.0.1:%d" % self.lis.getsockname()[1]
        self.swallow = threading.Event()
        self.mu = threading.Lock()
        self.conns: List[socket.socket] = []
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.lis.accept()
            except OSError:
                return
            u = socket.create_connection(self.upstream)
            with self.mu:
                self.accepted += 1
                self.conns += [c, u]
            threading.Thread(target=self._pump, args=(c, u, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                if answers and self.swallow.is_set():
                    continue  # the answer is lost
                dst.sendall(b)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> None:
        """Closes every connection and stops swallowing."""
        with self.mu:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.swallow.clear()

    def close(self) -> None:
        self.lis.close()
        self.cut()


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


class ProducerTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = DEV.client()

    def tearDown(self) -> None:
        self.c.close()

    def test_append_and_read(self) -> None:
        p = self.c.producer("conf-append")
        lsns = [p.append({"conf-a": [b"a%d" % i, b"b%d" % i], "conf-b": [b"x%d" % i]}) for i in range(5)]
        self.assertEqual(lsns, sorted(set(lsns)), "LSNs increase")
        got = list(self.c.read_topic("conf-a"))
        self.assertEqual([(m.offset, m.lsn, m.value) for m in got],
                         [(2 * i + j, lsns[i], b"%s%d" % (b"ab"[j:j + 1], i)) for i in range(5) for j in range(2)])
        self.assertEqual([m.value for m in self.c.read_topic("conf-a", offset=7, limit=2)], [b"b3", b"a4"])
        # Both topics or neither: each transaction holds its two slices.
        txs = list(self.c.tail(lsns[0], lsns[-1], topics=["conf-a", "conf-b"]))
        self.assertEqual([t.lsn for t in txs], lsns)
        for t in txs:
            self.assertEqual(sorted(s.topic for s in t.slices), ["conf-a", "conf-b"])

    def test_pipelined_appends_exactly_once(self) -> None:
        """Five threads share one producer (up to 5 in flight): every
        transaction is written once, in the order of its sequence, and a
        refused one in the middle of the window writes nothing."""
        p = self.c.producer("conf-pipe")
        results: dict = {}
        errors: list = []
        # Count the producer's calls that overlap (a serialised producer
        # never has two).
        mu, busy, most = threading.Lock(), [0], [0]
        call = self.c._call

        def counted(*args, **kw):
            with mu:
                busy[0] += 1
                most[0] = max(most[0], busy[0])
            try:
                return call(*args, **kw)
            finally:
                with mu:
                    busy[0] -= 1

        self.c._call = counted

        def worker(w: int) -> None:
            for i in range(20):
                v = b"w%d-%d" % (w, i)
                try:
                    if i == 10 and w == 0:  # an invalid one among the others: a hole
                        p.append({"no spaces allowed": [v]})
                    else:
                        results[v] = p.append({"conf-pipe": [v]})
                except logplayer.NotWritten as e:
                    errors.append((v, e))

        threads = [threading.Thread(target=worker, args=(w,)) for w in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual([v for v, _ in errors], [b"w0-10"], errors)
        self.assertGreater(most[0], 1, "no two appends were in flight at once")
        self.assertLessEqual(most[0], 5 + 1, "more than the window in flight (+1: a registration)")
        self.assertEqual(len(results), 99)
        got = list(self.c.read_topic("conf-pipe"))
        self.assertEqual(sorted(m.value for m in got), sorted(results), "each transaction exactly once")
        self.assertEqual({m.value: m.lsn for m in got}, results, "the LSN each append returned")
        for w in range(5):  # one thread's appends are in its order
            mine = [m.value for m in got if m.value.startswith(b"w%d-" % w)]
            self.assertEqual(mine, sorted(mine, key=lambda v: int(v.split(b"-")[1])))

    def test_condition_failed_writes_nothing(self) -> None:
        p = self.c.producer("conf-cond")
        p.append({"conf-cond": [b"first"]})
        with self.assertRaises(logplayer.ConditionFailed) as cm:
            p.append({"conf-cond": [b"never"]}, expect={"conf-cond": 0})
        self.assertEqual((cm.exception.applied, cm.exception.topic, cm.exception.actual),
                         (logplayer.Applied.NO, "conf-cond", 1))
        p.append({"conf-cond": [b"second"]}, expect={"conf-cond": 1})
        self.assertEqual([m.value for m in self.c.read_topic("conf-cond")], [b"first", b"second"])

    def test_refusals_say_not_written(self) -> None:
        with self.assertRaises(logplayer.NotWritten) as cm:
            self.c.producer("conf-bad").append({"no spaces allowed": [b"x"]})
        self.assertEqual((cm.exception.code, cm.exception.applied), ("INVALID_TOPIC", logplayer.Applied.NO))
        bad = DEV.client(token="not-a-token")
        try:
            with self.assertRaises(logplayer.NotWritten) as cm:
                bad.producer("conf-bad").append({"conf-bad": [b"x"]})
            self.assertEqual(cm.exception.code, "UNAUTHENTICATED")
        finally:
            bad.close()
        with self.assertRaises(logplayer.UnknownTopic):
            list(self.c.read_topic("conf-never-written"))

    def test_fencing(self) -> None:
        old = self.c.producer("conf-fence")
        old.append({"conf-fence": [b"old-1"]})
        new = self.c.producer("conf-fence")
        new.append({"conf-fence": [b"new-1"]})  # registers: a new epoch fences old
        for _ in range(2):  # and old stays fenced
            with self.assertRaises(logplayer.ProducerFenced) as cm:
                old.append({"conf-fence": [b"zombie"]})
            self.assertEqual(cm.exception.applied, logplayer.Applied.NO)
            self.assertEqual(cm.exception.current, new.registered[1])
        self.assertGreater(new.registered[1], old.registered[1])
        self.assertEqual(old.registered[0], new.registered[0], "same name, same id")
        self.assertEqual([m.value for m in self.c.read_topic("conf-fence")], [b"old-1", b"new-1"])

    def test_retry_after_dropped_connection_writes_once(self) -> None:
        leader = DEV.leader()
        proxy = Proxy(leader)
        c = DEV.client([proxy.addr], attempt_timeout=60)
        watcher = DEV.client([leader])
        try:
            p = c.producer("conf-drop")
            p.append({"conf-drop": [b"before"]})
            head = watcher.status(leader).head_lsn
            proxy.swallow.set()  # from now on the answers are lost
            out: list = []
            t = threading.Thread(target=lambda: out.append(p.append({"conf-drop": [b"once"]})))
            t.start()
            wait_for(lambda: watcher.status(leader).head_lsn > head, "the append to commit on the leader")
            proxy.cut()  # the client sees its connection drop with the outcome unknown
            t.join(60)
            self.assertFalse(t.is_alive(), "append did not return after the cut")
            self.assertEqual(len(out), 1, "append raised instead of retrying")
            self.assertGreaterEqual(proxy.accepted, 2, "the retry went over a new connection")
            msgs = list(watcher.read_topic("conf-drop"))
            self.assertEqual([m.value for m in msgs], [b"before", b"once"], "written exactly once")
            self.assertEqual(msgs[1].lsn, out[0], "the retry answered the first attempt's LSN")
            self.assertEqual(p.append({"conf-drop": [b"after"]}), watcher.status(leader).head_lsn)
        finally:
            c.close()
            watcher.close()
            proxy.close()


    def test_in_doubt_then_resolve_writes_once(self) -> None:
        leader = DEV.leader()
        proxy = Proxy(leader)
        c = DEV.client([proxy.addr], attempt_timeout=0.5)
        watcher = DEV.client([leader])
        try:
            p = c.producer("conf-doubt")
            p.append({"conf-doubt": [b"before"]})
            proxy.swallow.set()  # every answer is lost until the cut
            with self.assertRaises(logplayer.InDoubt) as cm:
                p.append({"conf-doubt": [b"maybe"]}, timeout=2)
            self.assertEqual(cm.exception.applied, logplayer.Applied.MAYBE)
            self.assertEqual(cm.exception.sequence, 2)
            with self.assertRaises(logplayer.InDoubt):  # nothing else goes out while it is in doubt
                p.append({"conf-doubt": [b"other"]})
            proxy.cut()
            lsn = p.resolve()
            self.assertIsNone(p.resolve(), "nothing left in doubt")
            msgs = list(watcher.read_topic("conf-doubt"))
            self.assertEqual([m.value for m in msgs], [b"before", b"maybe"], "written exactly once")
            self.assertEqual(msgs[1].lsn, lsn)
            p.append({"conf-doubt": [b"after"]})
        finally:
            c.close()
            watcher.close()
            proxy.close()


class TargetTest(unittest.TestCase):
    """A Python target (examples/sqlite_target.py) fed by a LogPlayer process,
    killed with SIGKILL under load, checked exactly once against the log."""

    TOPIC = "conf-orders"

    def start_target(self, db: str, port: int) -> subprocess.Popen:
        tls = DEV.tls
        p = DEV.spawn([PYTHON, os.path.join(SDK, "examples", "sqlite_target.py"), "--db", db,
                       "--addr", "127.0.0.1:%d" % port, "--id", "pyt", "--topics", self.TOPIC,
                       "--cert", os.path.join(tls, "pyt.crt"), "--key", os.path.join(tls, "pyt.key"),
                       "--client-ca", os.path.join(tls, "ca.crt")], "target.log")
        wait_for(lambda: listening(port) or p.poll() is not None, "the target to listen")
        self.assertIsNone(p.poll(), "target exited; see target.log")
        return p

    @staticmethod
    def applied(db: str) -> int:
        try:
            con = sqlite3.connect(db, timeout=5)
            try:
                row = con.execute("SELECT v FROM meta WHERE k = 'applied_lsn'").fetchone()
            finally:
                con.close()
        except sqlite3.Error:
            return 0
        return row[0] if row else 0

    def test_exactly_once_under_kill9(self) -> None:
        tls = DEV.tls
        subprocess.run([DEV.bin, "certs", "--dir", tls, "--node", "pyt"], check=True, stdout=subprocess.DEVNULL)
        db = os.path.join(DEV.tmp, "target.db")
        port = free_port()
        tgt = self.start_target(db, port)
        DEV.spawn([DEV.bin, "player", "--id", "py-conformance", "--store", ",".join(DEV.addrs),
                   "--target", "pyt=127.0.0.1:%d/%s" % (port, self.TOPIC), "--admin-addr", "",
                   "--progress-interval", "200ms",
                   "--tls-ca", os.path.join(tls, "ca.crt"), "--tls-cert", os.path.join(tls, "player.crt"),
                   "--tls-key", os.path.join(tls, "player.key")], "player.log")
        c = DEV.client()
        done: List[int] = []
        errors: List[BaseException] = []

        def produce() -> None:
            try:
                p = c.producer("conf-target")
                for i in range(300):
                    done.append(p.append({self.TOPIC: [b"o%d-0" % i, b"o%d-1" % i], "conf-other": [b"x%d" % i]}))
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        t = threading.Thread(target=produce)
        t.start()
        kills = 0
        try:
            for at in (60, 140, 220):
                wait_for(lambda: len(done) >= at or not t.is_alive(), "%d appends" % at)
                wait_for(lambda: self.applied(db) > 0, "the target to apply something")
                tgt.send_signal(signal.SIGKILL)
                tgt.wait()
                kills += 1
                tgt = self.start_target(db, port)
            t.join(120)
            self.assertFalse(errors, errors)
            self.assertEqual(len(done), 300)
            wait_for(lambda: self.applied(db) >= done[-1], "the target to apply lsn %d" % done[-1], timeout=90)
        finally:
            t.join(5)
            c.close()
        self.assertEqual(kills, 3)
        tgt.send_signal(signal.SIGKILL)
        tgt.wait()

        con = sqlite3.connect(db)
        rows = con.execute('SELECT "offset", lsn, value FROM messages WHERE topic = ? ORDER BY id',
                           (self.TOPIC,)).fetchall()
        offsets = dict(con.execute("SELECT topic, next FROM offsets"))
        con.close()
        c = DEV.client()
        try:
            log = [(m.offset, m.lsn, m.value) for m in c.read_topic(self.TOPIC)]
        finally:
            c.close()
        self.assertEqual(len(log), 600)
        self.assertEqual(len(rows), len(set(rows)), "a message applied twice")
        self.assertEqual(rows, log, "the target holds the log's messages once, in order")
        self.assertEqual(offsets, {self.TOPIC: 600}, "only the subscribed topic, at its end")


if __name__ == "__main__":
    unittest.main()
