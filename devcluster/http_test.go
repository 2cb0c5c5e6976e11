package devcluster_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/logplayer/logplayer/devcluster"
	"github.com/logplayer/logplayer/internal/testhttp"
	"github.com/logplayer/logplayer/internal/testwait"
	"github.com/logplayer/logplayer/logstore/logstoretest"
)

// startPlain starts a dev cluster on random ports without TLS, stopped at
// the test's end.
func startPlain(t *testing.T, ctx context.Context) *devcluster.Cluster {
	t.Helper()
	c, err := devcluster.Start(ctx, devcluster.Config{Logger: logstoretest.QuietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// TestNotLeaderOverHTTPNamesLeaderHTTP: a follower's NOT_LEADER over HTTP
// names the leader's HTTP address (ErrorDetail.leader_http_address, beside
// the gRPC leader_address), and so does its Status; an HTTP client that
// follows the hint appends.
func TestNotLeaderOverHTTPNamesLeaderHTTP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := startPlain(t, ctx)
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()

	var leader int
	testwait.For(t, 60*time.Second, "every node's Status naming the leader's HTTP address", func() bool {
		var ok bool
		leader, ok = leaderOverHTTP(t, c, hc)
		return ok
	})
	follower := (leader + 1) % devcluster.Stores
	const txn = `{"slices": [{"topic": "orders", "messages": [{"value": "eA=="}]}]}`
	code, resp := testhttp.Call(t, hc, "POST", "http://"+c.HTTPAddrs[follower]+"/v1/append", "", txn)
	ds, _ := resp["details"].([]any)
	if code != http.StatusServiceUnavailable || len(ds) != 1 {
		t.Fatalf("append on follower %s: %d %v", devcluster.NodeID(follower), code, resp)
	}
	d := ds[0].(map[string]any)
	if d["code"] != "NOT_LEADER" || d["applied"] != "APPLIED_NO" || d["leaderAddress"] != c.StoreAddrs[leader] || d["leaderHttpAddress"] != c.HTTPAddrs[leader] {
		t.Fatalf("NOT_LEADER detail %v: want leader %s's addresses %s and %s", d, devcluster.NodeID(leader), c.StoreAddrs[leader], c.HTTPAddrs[leader])
	}
	code, resp = testhttp.Call(t, hc, "POST", "http://"+d["leaderHttpAddress"].(string)+"/v1/append", "", txn)
	if code != http.StatusOK || resp["lsn"] == nil {
		t.Fatalf("append at the hinted leader: %d %v", code, resp)
	}

	// A new leader registers its own HTTP address (the bootstrap list does
	// not name it): the hint follows the leadership.
	if err := c.Client.TransferLeadership(ctx, devcluster.NodeID(follower)); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 60*time.Second, "the leadership moving to "+devcluster.NodeID(follower), func() bool {
		l, ok := leaderOverHTTP(t, c, hc)
		return ok && l == follower
	})
}

// leaderOverHTTP returns the index of the leader every node's GET
// /v1/status names together with that leader's HTTP address; false while
// they do not all agree.
func leaderOverHTTP(t *testing.T, c *devcluster.Cluster, hc *http.Client) (int, bool) {
	t.Helper()
	ids := []string{devcluster.NodeID(0), devcluster.NodeID(1), devcluster.NodeID(2)}
	leader := -1
	for i := range c.HTTPAddrs {
		code, st := testhttp.Call(t, hc, "GET", "http://"+c.HTTPAddrs[i]+"/v1/status", "", "")
		id, _ := st["leaderId"].(string)
		l := slices.Index(ids, id)
		if code != http.StatusOK || l < 0 || (i > 0 && l != leader) || st["leaderHttpAddress"] != c.HTTPAddrs[l] {
			return -1, false
		}
		leader = l
	}
	return leader, true
}
