package playerrole_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"

	"google.golang.org/grpc"

	"github.com/logplayer/logplayer/internal/serve"
	"github.com/logplayer/logplayer/internal/serve/playerrole"
	"github.com/logplayer/logplayer/logplayer"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// TestRunErrorsInOrder: an invalid LogPlayer config is ErrConfig and
// comes before the security settings are read; their error is returned
// as it is.
func TestRunErrorsInOrder(t *testing.T) {
	errSec := errors.New("bad security flags")
	called := false
	sec := func() ([]grpc.ServerOption, *tls.Config, error) { called = true; return nil, nil, errSec }
	role := playerrole.Role{Player: logplayer.Config{Logger: logstoretest.QuietLogger()}, Security: sec, Log: logstoretest.QuietLogger()}
	err := playerrole.Run(context.Background(), role)
	if !errors.Is(err, serve.ErrConfig) || !errors.Is(err, logplayer.ErrInvalidConfig) || called {
		t.Fatalf("Run without LogStore addresses: %v (security read: %v), want ErrConfig first", err, called)
	}
	role.Player.LogStore = []string{logstoretest.FreeAddr(t)}
	if err := playerrole.Run(context.Background(), role); err != errSec {
		t.Fatalf("Run: %v, want the security error", err)
	}
}
