"""An exactly-once LogPlayer target on SQLite (the standard library's).

Every delivered message is one row of ``messages``; the State (applied
LSN, epoch, per-topic next offsets) lives in ``meta`` and ``offsets`` of
the same database, written in the same transaction as the messages, with
``synchronous=FULL``: after a crash (kill -9, power loss) the database
holds every message up to the applied LSN once and nothing after it.

    /usr/bin/python3 sqlite_target.py --db events.db --addr 127.0.0.1:7600 --id pyt --topics orders
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys
from typing import List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from logplayer import target  # noqa: E402
from logplayer._pb import target_pb2  # noqa: E402


class SQLiteStore:
    """A target.Store on one SQLite file."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA journal_mode=DELETE")
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS offsets (topic TEXT PRIMARY KEY, next INTEGER NOT NULL);
            CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
                topic TEXT NOT NULL, "offset" INTEGER NOT NULL, lsn INTEGER NOT NULL, value BLOB NOT NULL);
        """)

    def state(self) -> target.State:
        meta = dict(self.db.execute("SELECT k, v FROM meta"))
        return target.State(applied_lsn=meta.get("applied_lsn", 0), epoch=meta.get("epoch", 0),
                            topics=dict(self.db.execute("SELECT topic, next FROM offsets")))

    def apply(self, deliveries: List[target_pb2.Delivery], next_state: target.State) -> None:
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            for d in deliveries:
                for sl in d.slices:
                    cur.executemany('INSERT INTO messages (topic, "offset", lsn, value) VALUES (?, ?, ?, ?)',
                                    [(sl.topic, sl.first_offset + i, d.lsn, m.value) for i, m in enumerate(sl.messages)])
            cur.executemany("INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)",
                            [("applied_lsn", next_state.applied_lsn), ("epoch", next_state.epoch)])
            cur.executemany("INSERT OR REPLACE INTO offsets (topic, next) VALUES (?, ?)", next_state.topics.items())
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--id", required=True)
    ap.add_argument("--topics", default="", help="comma-separated; empty: any topic")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--client-ca")
    a = ap.parse_args()
    topics = [t for t in a.topics.split(",") if t] or None
    srv = target.serve(SQLiteStore(a.db), a.addr, a.id, topics=topics, cert=a.cert, key=a.key, client_ca=a.client_ca)
    print(f"serving {srv.port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: srv.stop(1))
    srv.wait()


if __name__ == "__main__":
    main()
