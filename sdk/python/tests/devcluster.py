"""A real ``logplayer dev`` cluster for the conformance tests.

The binary is $LOGPLAYER_BIN (the Go test builds it), else built here with
``go build``. The cluster runs with TLS and tokens (dev's default) on
random ports (``--port-base 0``); its banner gives the store addresses and
the TLS directory. Its files (logs of dev, the player and the target)
live in a temporary directory, removed at the end unless $LOGPLAYER_KEEP
is set.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Callable, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
SDK = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(SDK))
sys.path.insert(0, SDK)

import logplayer  # noqa: E402

PYTHON = "/usr/bin/python3"


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Polls cond until it holds; fails with what after timeout seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(tmp: str) -> str:
    path = os.environ.get("LOGPLAYER_BIN")
    if path:
        return path
    path = os.path.join(tmp, "logplayer")
    subprocess.run(["go", "build", "-o", path, "./cmd/logplayer"], cwd=ROOT, check=True)
    return path


class Dev:
    """A running ``logplayer dev`` process."""

    def __init__(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="lp-pytest-")
        self.bin = binary(self.tmp)
        self.dir = os.path.join(self.tmp, "dev")
        self.log = open(os.path.join(self.tmp, "dev.log"), "wb")
        self.proc = subprocess.Popen([self.bin, "dev", "--port-base", "0", "--metrics=false", "--data-dir", self.dir],
                                     stdout=subprocess.PIPE, stderr=self.log)
        self.addrs: List[str] = []
        self.tls = ""
        lines: List[str] = []
        deadline = time.monotonic() + 120
        for raw in self.proc.stdout:
            line = raw.decode()
            lines.append(line)
            m = re.search(r"store \S+\s+api (\S+)", line)
            if m:
                self.addrs.append(m.group(1))
            m = re.search(r"tls\s+CA, certificates, policy and token in (\S+)", line)
            if m:
                self.tls = m.group(1)
            if line.startswith("Press Ctrl-C") or time.monotonic() > deadline:
                break
        if len(self.addrs) != 3 or not self.tls:
            self.stop()
            raise RuntimeError("logplayer dev did not print its addresses and TLS directory:\n" + "".join(lines))
        threading.Thread(target=self._drain, daemon=True).start()
        with open(os.path.join(self.tls, "cli.token")) as f:
            self.token = f.read().strip()
        self.ca = os.path.join(self.tls, "ca.crt")
        self.children: List[subprocess.Popen] = []

    def _drain(self) -> None:
        for _ in self.proc.stdout:
            pass

    def client(self, addrs: Optional[List[str]] = None, **kw) -> logplayer.Client:
        """A client of the cluster as the dev CLI identity (its token)."""
        return logplayer.Client(addrs or self.addrs, ca=self.ca, token=kw.pop("token", self.token), **kw)

    def leader(self) -> str:
        c = self.client()
        try:
            addr: List[str] = []
            wait_for(lambda: bool(addr.append(c.status().leader_address) or addr[-1]), "a leader")
            return addr[-1]
        finally:
            c.close()

    def spawn(self, args: List[str], log: str) -> subprocess.Popen:
        """Starts a child process (stopped by stop()), its output in tmp/log."""
        with open(os.path.join(self.tmp, log), "ab") as out:  # the child keeps its own descriptor
            p = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
        self.children.append(p)
        return p

    def stop(self) -> None:
        for p in self.children:
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if not os.environ.get("LOGPLAYER_KEEP"):
            shutil.rmtree(self.tmp, ignore_errors=True)
