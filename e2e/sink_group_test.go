package e2e

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sinkGroupPlayers is how many LogPlayers of group groupName feed the sink.
const sinkGroupPlayers = 2

// TestSinkPlayerGroupTakeover: two LogPlayers in a group (`player --group`,
// leases through the LogStore) feed one `logplayer sink postgres` under
// load. The owner of the sink target is SIGSTOPped past its lease; the other
// member takes the target over with a newer fencing token, which the sink
// stores in its state row (in PostgreSQL) before it accepts the stream, and
// ends the old owner's stream (stale_epoch). The old owner is resumed after
// twice the lease: it must count its lease lapse and never commit again under
// its old token (the row's epoch stays the new owner's token). After the
// takeover and after the resume, every table must hold exactly the log's
// messages of its topic. (A resumed member checks its lease deadline before
// every Send, so it sends nothing late; what fences its stream is the sink's
// epoch, read from the row. A late commit by a second sink process on the
// same row is TestSinkUnderFaults's takeover.)
func TestSinkPlayerGroupTakeover(t *testing.T) {
	began := time.Now()
	e := startSinkOnly(t, sinkOptions{cluster: clusterOptions{playerAdmin: true}})
	g := newPlayerGroup(e.c, sinkGroupPlayers, []string{e.targetSpec(e.addr)})
	e.c.group = g
	for _, m := range g.members {
		m.proc.start()
	}
	stop := e.produce()
	defer stop()
	e.waitAcked(200)
	old, token := e.waitSinkOwner("", 0)
	e.check("start")
	t.Logf("%v: %s owns the sink with token %d", since(began), old.id, token)

	d, _, err := g.describe()
	if err != nil {
		t.Fatal(err)
	}
	lease := time.Duration(d.LeaseNanos)
	lapses, err := metricValue(old.metrics, "logplayer_group_lease_lapses_total", "")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	old.proc.signal(syscall.SIGSTOP)
	owner, newToken := e.waitSinkOwner(old.id, token)
	t.Logf("%v: %s took the sink over with token %d, %v after the SIGSTOP of %s", since(began), owner.id, newToken, time.Since(at).Round(time.Millisecond), old.id)
	e.waitAcked(200)
	e.check("the takeover while the old owner is stopped")
	// The new owner's Hello ended the old owner's stream in the sink:
	// fenced by the newer token (the target SDK's refusal). Logged, not
	// asserted: an old owner stopped between two streams (reconnecting)
	// has none to end.
	if l := sinkLogLine(e.sink, fmt.Sprintf("epoch %d took over from epoch %d", newToken, token)); l != "" {
		t.Logf("the sink: %s", l)
	} else {
		t.Logf("the sink ended no stream of token %d at the takeover (none was open)", token)
	}

	if rest := 2*lease - time.Since(at); rest > 0 {
		time.Sleep(rest)
	}
	old.proc.signal(syscall.SIGCONT)
	e.c.waitFor(progressMax, old.id+" to count its lease lapse", func() error {
		v, err := metricValue(old.metrics, "logplayer_group_lease_lapses_total", "")
		if err == nil && v <= lapses {
			err = fmt.Errorf("lease lapses %v, was %v", v, lapses)
		}
		return err
	})
	e.waitAcked(200)
	stop()
	e.check("the resumed old owner, load stopped")
	// Nothing committed under the old token after the takeover: the row
	// holds the current owner's token (waitSinkOwner; a commit under an
	// older one is refused by the row's check, ErrFenced, with
	// STALE_EPOCH) and every member's refusals from the sink are
	// STALE_EPOCH only.
	if _, cur := e.waitSinkOwner("", 0); cur < newToken {
		t.Errorf("the sink's owner has token %d (stored in the state row), below the takeover's %d", cur, newToken)
	}
	for _, m := range g.members {
		info, err := checkPlayerMetrics(m.metrics, `code="STALE_EPOCH"`)
		if err != nil {
			t.Errorf("%s: %v", m.id, err)
		}
		t.Logf("LogPlayer %s:\n%s", m.id, strings.Join(info, "\n"))
	}
	for _, p := range append(g.procs(), e.sink) {
		p.checkLog()
	}
}

// waitSinkOwner waits until the group assigns the sink target to a member
// other than notID with a token above after and the sink stored that token
// in its state row (it accepted the owner's Hello), and returns the member
// and token.
func (e *sinkEnv) waitSinkOwner(notID string, after uint64) (*groupMember, uint64) {
	e.t.Helper()
	g := e.c.group
	var owner *groupMember
	var token uint64
	e.c.waitFor(failoverMax+progressMax, fmt.Sprintf("a member other than %q to own %s with a token above %d", notID, sinkID, after), func() error {
		d, _, err := g.describe()
		if err != nil {
			return err
		}
		a := owners(d)[sinkID]
		if a == nil || a.MemberId == "" || a.MemberId == notID || a.Token <= after {
			return fmt.Errorf("%s assigned to %q token %d", sinkID, a.GetMemberId(), a.GetToken())
		}
		m := g.member(a.MemberId)
		if epoch := e.stateEpoch(); epoch != a.Token {
			return fmt.Errorf("%s owns %s with token %d, the state row holds epoch %d", m.id, sinkID, a.Token, epoch)
		}
		owner, token = m, a.Token
		return nil
	})
	return owner, token
}

// stateEpoch is the epoch in the sink's state row (0 before the row).
func (e *sinkEnv) stateEpoch() uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	db := e.openDB()
	defer db.Close()
	var epoch int64
	if err := db.QueryRowContext(ctx, `SELECT epoch FROM logplayer_target_state WHERE target_id = $1`, sinkID).Scan(&epoch); err != nil && !errors.Is(err, sql.ErrNoRows) {
		e.t.Fatal(err)
	}
	return uint64(epoch)
}
