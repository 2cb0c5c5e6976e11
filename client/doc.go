// Package client is the Go client of a LogStore cluster (Client: leader
// following, safe retries, resuming reads; see the comment in client.go) and
// the application SDK on top of it: exactly-once writes, a transaction
// builder and readers that resume without gap or duplicate (DESIGN.md §4, §7).
//
// # Writing exactly once
//
// A Producer (Client.NewProducer) has an id (random unless given) and
// numbers its transactions 1, 2, 3, …. It sends each with its id and
// sequence and resends the same sequence after a lost response, a timeout
// or a leader change; the cluster answers a repeated sequence with the
// first result (Result.Duplicate), so nothing is written twice:
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
// InvalidArgument error for a malformed transaction; a *InDoubtError
// (ErrInDoubt) when ctx ended before any answer: the transaction may or may
// not have committed, the producer keeps it, and Producer.Resolve resends
// it with the same sequence to learn its outcome (Append refuses until
// then); a *SequenceError (ErrSequenceMismatch) when the cluster no longer
// knows the producer's sequence (idle expiry, table eviction, an id shared
// by two producers): the producer is then unusable and says why.
//
// One Producer has one transaction in flight (the cluster remembers a
// producer's last sequence only); concurrent calls take turns. Use one
// Producer per writing goroutine for parallel writes.
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
