// Package logplayer is the LogPlayer engine (docs/DESIGN.md, "LogPlayer"): it reads the
// committed log from the LogStore and delivers each transaction's slices to
// the targets subscribed to their topics, in LSN order and exactly once, over
// one bidirectional gRPC stream per target.
//
// New(Config) builds a Player; Run(ctx) runs it:
//
//  1. takes a new epoch from the LogStore (NextEpoch, a Raft-committed
//     counter) and sends it in every Hello, so targets refuse any older
//     LogPlayer (fencing; a fenced Player's Run returns ErrFenced);
//  2. handshakes with every configured target (at most HandshakeTimeout)
//     and starts the main stream at min(applied of those that answered)+1,
//     or at the LogStore head when none did; the dispatcher's last-ack
//     filter protects the targets further ahead, and targets that answer
//     later recover like returning ones;
//  3. dispatches every transaction of the main stream into the targets'
//     queues (package dispatcher), and streams each queue to its target.
//
// A target whose stream fails is suspended; when it answers a new Hello
// with its durable applied LSN x, the dispatcher atomically bumps its term
// and fixes the recovery range (x, currentLSN], a recovery stream reads that
// range from the LogStore (filtered to its topics) into its catchup queue,
// and the target rejoins the main stream when the catchup drains. A target
// too slow for its bounded queue is treated the same way (memory stays
// bounded whatever a target does). Idle targets receive progress markers so
// their applied LSN keeps up; every target's acked LSN is reported to the
// LogStore (ReportConsumer "logplayer/<id>") as its retention floor.
//
// # Term, session and raft term
//
// Three numbers grow at a reconnect or an election; each has one name.
// The term (types.Term) is the dispatcher's per-target generation: Return
// gives it once a Hello is answered, and the stream's pushes, batches and
// acks carry it; it never goes on the wire. The session (types.Session,
// Hello.session) is this LogPlayer's count of Deliver streams opened to a
// target in this epoch, never reset (not even when the target is removed
// and added again), because a target refuses a Hello whose session is below
// one it has seen in the same epoch; a Hello that fails before its
// handshake uses a session and no term. The raft term is the LogStore's
// Raft election term, which the fetcher reads only to prefer a leader.
//
// # Goroutines
//
//   - Run's goroutine is the dispatch loop: fetcher.Follow (the main
//     stream) calls dispatch for each transaction inline; dispatch calls
//     Dispatcher.Dispatch, signals the wake channel of each target that got
//     a message and cancels the stream of each target found slow. It owns
//     nothing but the main stream's position.
//   - ticker (one): progress markers (it looks every quarter
//     ProgressInterval; a target gets at most one per interval) and the
//     saturation gauge every second; no I/O.
//   - reporter (one): ReportConsumer of every target's acked LSN every
//     ReportInterval (each call with a deadline).
//   - per target, runner.run (one): dials nothing itself (the ClientConn
//     does), runs sessions one after another with backoff. In a session it
//     is the sender: the only goroutine that calls stream.Send, fed by the
//     wake channel and the window's released channel.
//   - per session, receive (one): the only goroutine that calls
//     stream.Recv; turns cumulative acks into Dispatcher.AckTerm and
//     releases the in-flight window.
//   - per session of a returning target, recover (at most one): the
//     recovery fetcher; pushes (x, end] into the catchup queue, waiting on
//     the room channel when it is full, then FetchingCompleted.
//
// A session's goroutines share a context whose cancel cause says why the
// stream ended; the runner waits for all of them before the next session,
// so at most one stream per target is live at a time, and each stream has
// its own term (its generation): acks and pushes of an older term are
// refused by the dispatcher.
//
// # Locks and their order
//
// Player.admin (add/remove targets, start/stop) → runner.mu (the live conn
// and status strings) or Player.floors → conn.mu (the in-flight window) →
// the dispatcher's mutex. The dispatcher never calls back, so calling it
// with admin held is safe; no lock is held across Send, Recv or a channel
// send that can block (signals are non-blocking on capacity-1 channels).
// The runner map is copy-on-write (atomic pointer), so the dispatch loop
// takes no lock of this package at all.
//
// # Invariants
//
//   - At most one live stream per target; its term is the dispatcher term
//     returned by the Return that opened it.
//   - The main stream hands out every LSN from start+1 densely (the fetcher
//     and the dispatcher both check); a recovery range is (applied, end].
//   - In flight per target: at most WindowBatches batches and WindowBytes
//     payload bytes (one larger batch may go alone).
//   - Queued per target: at most the targetqueue bounds per inner queue;
//     beyond that the target is suspended and recovers from the LogStore.
package logplayer
