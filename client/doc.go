// Package client is the Go client of a LogStore cluster (Client: leader
// following, safe retries, resuming reads; see the comment in client.go) and
// the application SDK on top of it: exactly-once writes, a transaction
// builder and readers that resume without gap or duplicate (docs/DESIGN.md, "Exactly-once writes", and docs/DESIGN.md, "Guarantees").
//
// # Writing exactly once
//
// A Producer (Client.NewProducer) has a name (random unless given) that it
// registers with the cluster on first use (InitProducer: an id and an
// epoch) and numbers its transactions 1, 2, 3, …. It sends each with its
// id, epoch and sequence and resends the same sequence after a lost
// response, a timeout or a leader change; the cluster answers a repeated
// sequence with the first result (Result.Duplicate), so nothing is written
// twice:
//
//	p, _ := cl.NewProducer(client.ProducerConfig{})
//	res, err := p.AppendAtomic(ctx, map[string][][]byte{
//		"orders": {[]byte("order-17")},
//		"stock":  {[]byte("reserve sku-3")},
//	}) // both topics or neither
//
// Txn builds richer transactions: keys and headers (AddKeyed,
// AddMessages), conditions on a topic's next offset (Expect) or on a
// consumer group's committed offset (ExpectCommitted), and offset commits
// (CommitOffset) that ride in the same transaction as the messages.
//
// Outcomes of Producer.Append: a *Result; a *ConditionError
// (ErrConditionFailed) when a condition did not hold; the server's
// InvalidArgument error for a malformed transaction (or another refusal)
// when no attempt can have written it; a *InDoubtError (ErrInDoubt) when
// ctx ended before any answer, or an attempt may have committed before a
// later one was refused: the transaction may or may not have committed, the producer keeps it, and Producer.Resolve resends
// it with the same sequence to learn its outcome (Append refuses until
// then); a *FencedError (ErrProducerFenced) when another instance
// registered the same name (this one is a zombie and stops); a
// *SequenceError (ErrSequenceMismatch) when the cluster disagrees on the
// sequence in a way the producer cannot repair (a bug). When the cluster
// forgot the producer (its row expired idle: UNKNOWN_PRODUCER) the producer
// registers again; what may have committed is reported in doubt
// (InDoubtError.Lost: Resolve cannot learn it), never as a success. A
// pipelined transaction refused behind an earlier sequence that is still
// unanswered or in doubt is reported in doubt too (its error says "not
// written yet"): it keeps its sequence, so the ones sent after it stay
// writable, and Resolve writes it in order; transactions behind a
// sequence that never will be written are resent by Resolve under a new
// registration.
//
// A Producer has up to ProducerConfig.MaxInFlight (default and maximum 5,
// the cluster's window of remembered results) transactions in flight:
// concurrent Appends are sent without waiting for each other, in one
// AppendBatch call per round trip, and committed in the order their
// sequences were assigned.
//
// # Reading
//
// Reader (Client.NewReader) follows the log from an LSN, optionally only
// some topics; TopicReader (Client.NewTopicReader) follows one topic from
// an offset. Both read from any node, check that what they receive is
// contiguous (ErrContinuity otherwise), and after a node failure reopen
// their stream on another node from the position after the last item they
// returned. Next(ctx) waits at the end of the log; when ctx ends it
// returns ctx's error with the position unchanged.
//
// # Read-process-write
//
// A consumer that reads topic A and writes its output to topic B commits
// its position in the same transaction, conditioned on the position it
// started from:
//
//	from, _ := cl.CommittedOffset(ctx, "group", "A")
//	// read message at offset `from` from A, compute out, then:
//	p.Append(ctx, client.NewTxn().
//		Add("B", out).
//		CommitOffset("group", "A", from+1).
//		ExpectCommitted("group", "A", from))
//
// Whatever kills it (crash, cancellation, a zombie instance still sending),
// a restart from CommittedOffset writes each input's output exactly once: a
// transaction from a stale position fails with a *ConditionError whose
// Actual is the position to resume from.
//
// # Goroutines and invariants
//
// Producer and readers run on the caller's goroutine (context.AfterFunc
// cancels a reader's stream when the caller's ctx ends during a receive);
// the Client's only goroutines are the short-lived flushes that send
// concurrent Appends together in one AppendBatch call. A Producer's fields are owned by
// the holder of its turn token. Invariants: a Producer never sends a new
// sequence while an earlier one is in doubt, and never reuses a sequence
// for different content; a reader's position only moves past items it has
// returned.
package client
