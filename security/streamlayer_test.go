package security

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// streamLayer listens on 127.0.0.1:0 with files as both server and client
// certificate, allowing peers named n*.
func streamLayer(t *testing.T, files Files, log *logs) *StreamLayer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, err := NewStreamLayer(StreamLayerOptions{
		Listener:    ln,
		Server:      ServerOptions{Files: files},
		Client:      ClientOptions{Files: files},
		PeerAllowed: PeerPattern("n*"),
		Log:         log.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Two raft.NetworkTransports exchange an AppendEntries over mutual TLS.
func TestRaftTransportOverMutualTLS(t *testing.T) {
	p := newPKI(t, "ca")
	var l1, l2 logs
	t1 := raft.NewNetworkTransport(streamLayer(t, p.node("n1"), &l1), 2, 5*time.Second, io.Discard)
	t2 := raft.NewNetworkTransport(streamLayer(t, p.node("n2"), &l2), 2, 5*time.Second, io.Discard)
	defer t1.Close()
	defer t2.Close()

	go func() {
		rpc := <-t2.Consumer()
		req := rpc.Command.(*raft.AppendEntriesRequest)
		rpc.Respond(&raft.AppendEntriesResponse{Term: req.Term, Success: true, LastLog: 7}, nil)
	}()
	var resp raft.AppendEntriesResponse
	err := t1.AppendEntries("n2", t2.LocalAddr(), &raft.AppendEntriesRequest{
		RPCHeader: raft.RPCHeader{ID: []byte("n1"), Addr: []byte(t1.LocalAddr())},
		Term:      3, Entries: []*raft.Log{{Index: 7, Term: 3, Data: []byte("x")}},
	}, &resp)
	if err != nil || !resp.Success || resp.Term != 3 || resp.LastLog != 7 {
		t.Fatalf("AppendEntries over TLS: %+v, %v", resp, err)
	}
}

// A certificate from the right CA whose identity is not a Raft peer (a
// producer's) is refused both ways; a peer of another CA is refused too.
func TestRaftStreamLayerRefusesStrangers(t *testing.T) {
	p := newPKI(t, "ca")
	other := newPKI(t, "other-ca")
	var lnode, lprod, lother logs
	node := streamLayer(t, p.node("n1"), &lnode)
	defer node.Close()
	go discardAll(node)

	// The producer's layer: its own PeerAllowed would accept n1, but n1
	// refuses "producer".
	prodFiles := p.issue("producer", CertOptions{DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	prod, err := NewStreamLayer(StreamLayerOptions{Listener: ln, Server: ServerOptions{Files: prodFiles},
		Client: ClientOptions{Files: prodFiles}, PeerAllowed: PeerPattern("*"), Log: lprod.logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	go discardAll(prod)
	c, err := prod.Dial(raft.ServerAddress(node.Addr().String()), 5*time.Second)
	if err == nil {
		// TLS 1.3: the client's handshake ends before the server checks;
		// the refusal arrives on the first read.
		_, _ = c.Write([]byte{0})
		_, err = c.Read(make([]byte, 1))
		c.Close()
	}
	if err == nil {
		t.Fatal("a producer certificate spoke to a Raft peer")
	}
	line := lnode.waitFor(t, "which is not a Raft peer")
	if !strings.Contains(line, `"producer"`) {
		t.Fatalf("refusal %q does not name the identity", line)
	}

	// The node dialing the producer's listener refuses it too.
	_, err = node.Dial(raft.ServerAddress(prod.Addr().String()), 5*time.Second)
	if !errors.Is(err, ErrPeerNotAllowed) {
		t.Fatalf("dial to a non-peer: %v, want ErrPeerNotAllowed", err)
	}

	// Another CA's node: the dialer refuses the server certificate.
	stranger := streamLayer(t, other.node("n9"), &lother)
	defer stranger.Close()
	go discardAll(stranger)
	_, err = node.Dial(raft.ServerAddress(stranger.Addr().String()), 5*time.Second)
	if !errors.Is(err, ErrUnknownCA) {
		t.Fatalf("dial to another CA's node: %v, want ErrUnknownCA", err)
	}
}

func TestStreamLayerConfigRefusals(t *testing.T) {
	p := newPKI(t, "ca")
	f := p.node("n1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := NewStreamLayer(StreamLayerOptions{Listener: ln, Server: ServerOptions{Files: f}, Client: ClientOptions{Files: f}}); err == nil || !strings.Contains(err.Error(), "PeerAllowed") {
		t.Fatalf("no PeerAllowed: %v", err)
	}
	if _, err := NewStreamLayer(StreamLayerOptions{Listener: ln, Server: ServerOptions{Files: f}, Client: ClientOptions{Files: Files{CAFile: f.CAFile}}, PeerAllowed: PeerPattern("*")}); err == nil || !strings.Contains(err.Error(), "client certificate") {
		t.Fatalf("no client certificate: %v", err)
	}
}

// discardAll accepts connections and reads them to the end (which runs the
// server side of the handshake), until the layer closes.
func discardAll(l *StreamLayer) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
	}
}
