package e2e

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

// proxyQuiet is how long TestProxyCutHolds listens for bytes that a cut
// link must not pass.
const proxyQuiet = 300 * time.Millisecond

// TestProxyCutHolds checks the nemesis's blackhole: bytes pass while the
// link is up, are held (not lost, not passed) while it is cut, a
// connection opened during the cut is held too, and everything arrives in
// order once it is healed.
func TestProxyCutHolds(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }() // echo
		}
	}()
	p := newProxy(t, "echo", l.Addr().String())
	roundTrip := func(c net.Conn, msg string) {
		t.Helper()
		if _, err := c.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if err := c.SetReadDeadline(time.Now().Add(progressMax)); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, []byte(msg)) {
			t.Fatalf("read %q, %v; want %q", got, err, msg)
		}
	}
	quiet := func(c net.Conn) {
		t.Helper()
		if err := c.SetReadDeadline(time.Now().Add(proxyQuiet)); err != nil {
			t.Fatal(err)
		}
		var b [1]byte
		if n, err := c.Read(b[:]); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a cut link passed %d bytes (%v)", n, err)
		}
	}
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(c, "before")
	p.cut()
	if _, err := c.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	quiet(c)
	late, err := net.Dial("tcp", p.addr) // the kernel accepts it; the proxy holds it
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if _, err := late.Write([]byte("late")); err != nil {
		t.Fatal(err)
	}
	quiet(late)
	p.heal()
	got := make([]byte, 4)
	if err := c.SetReadDeadline(time.Now().Add(progressMax)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "held" {
		t.Fatalf("after heal: %q, %v; want the held bytes", got, err)
	}
	roundTrip(c, "after")
	if err := late.SetReadDeadline(time.Now().Add(progressMax)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(late, got); err != nil || string(got) != "late" {
		t.Fatalf("connection opened during the cut: %q, %v; want its bytes", got, err)
	}
}

// TestFreeAddrOutsideEphemeralRange checks that the addresses the
// processes keep across restarts are below the ephemeral port range, where
// no outgoing connection takes them while a process is down (the soak's
// store node that could not bind its metrics port again).
func TestFreeAddrOutsideEphemeralRange(t *testing.T) {
	lo := ephemeralLow()
	for range 20 {
		addr := freeAddr(t)
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < freePortMin || n >= lo {
			t.Fatalf("freeAddr %s: port outside [%d, %d)", addr, freePortMin, lo)
		}
	}
}
