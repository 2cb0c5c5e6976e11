package serve

import (
	"errors"
	"log/slog"
	"net"

	"github.com/logplayer/logplayer/security"
)

// RaftTLS returns the mutual-TLS Raft stream layer of a LogStore node
// (logstore.Config.RaftStream) on lis: files are the node's certificate,
// key and the CA verifying peers (who must present a certificate of it),
// and only identities matching one of peers (path.Match patterns) may
// speak Raft with it, both ways. The layer owns lis.
func RaftTLS(lis net.Listener, files security.Files, peers []string, log *slog.Logger) (*security.StreamLayer, error) {
	if len(peers) == 0 {
		return nil, errors.New("raft tls: no peer identities (which certificates are Raft peers)")
	}
	reload := security.ReloadOptions{Log: log}
	return security.NewStreamLayer(security.StreamLayerOptions{
		Listener:    lis,
		Server:      security.ServerOptions{Files: files, ClientAuth: security.ClientAuthRequire, Reload: reload},
		Client:      security.ClientOptions{Files: files, Reload: reload},
		PeerAllowed: security.PeerPattern(peers...),
		Log:         log,
	})
}
