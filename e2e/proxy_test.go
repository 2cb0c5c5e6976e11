package e2e

import (
	"net"
	"sync"
	"testing"
)

// proxy forwards every TCP connection it accepts to upstream (a process's
// address: it may be down, then the connection is closed at once, as a
// refused one). The nemesis cuts it to blackhole the link: bytes already
// read and new connections are held, not dropped, until it is healed, so
// the TCP streams stay intact, as after a real partition healed before
// either side's timeout; a side that gives up closes its connection and
// the proxy closes the other side too (a partition would not carry that
// FIN; the peer learns it at its next read or write instead, which is the
// one way this differs from dropped packets).
//
// Goroutines: one accept loop; per connection, one that dials upstream and
// two copiers. All end at close.
type proxy struct {
	name     string
	addr     string // where it listens
	upstream string
	l        net.Listener

	mu struct {
		sync.Mutex
		open   chan struct{} // closed while the link is up
		conns  map[net.Conn]struct{}
		closed bool
	}
	shut chan struct{} // closed by close
	wg   sync.WaitGroup
}

// proxyBuf is the copy buffer of one direction of one connection.
const proxyBuf = 32 << 10

// newProxy listens on a free 127.0.0.1 port and forwards to upstream until
// the test ends.
func newProxy(t testing.TB, name, upstream string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{name: name, addr: l.Addr().String(), upstream: upstream, l: l, shut: make(chan struct{})}
	p.mu.open = make(chan struct{})
	close(p.mu.open)
	p.mu.conns = map[net.Conn]struct{}{}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// cut blackholes the link (idempotent).
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.mu.open:
		p.mu.open = make(chan struct{})
	default:
	}
}

// heal lets the held bytes and connections through (idempotent).
func (p *proxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.mu.open:
	default:
		close(p.mu.open)
	}
}

// wait blocks while the link is cut; false once the proxy is closed.
func (p *proxy) wait() bool {
	p.mu.Lock()
	open := p.mu.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-p.shut:
		return false
	}
}

// track registers c to be closed by close; false if already closed.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return false
	}
	p.mu.conns[c] = struct{}{}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.mu.conns, c)
	}
}

func (p *proxy) accept() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Go(func() { p.forward(c) })
	}
}

// forward connects c to upstream once the link is up and copies both ways
// until either side closes.
func (p *proxy) forward(c net.Conn) {
	defer c.Close()
	defer p.untrack(c)
	if !p.wait() {
		return
	}
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return // upstream down: the client sees its connection closed
	}
	defer up.Close()
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	var both sync.WaitGroup
	both.Go(func() { p.copy(up, c) })
	both.Go(func() { p.copy(c, up) })
	both.Wait()
}

// copy forwards src to dst, holding what it read while the link is cut;
// when either side fails it closes both (so the other copier ends too).
func (p *proxy) copy(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, proxyBuf)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// close stops the proxy and every connection through it.
func (p *proxy) close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	close(p.shut)
	_ = p.l.Close()
	for c := range p.mu.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
