package targettest

import (
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/proto/targetpb"
	"github.com/logplayer/logplayer/types"
)

// Log generates deliveries the way a LogStore would number them: LSNs
// increase, and each topic's offsets are dense from 0. Not safe for
// concurrent use.
type Log struct {
	lsn  types.LSN
	next map[string]types.Offset
}

// NewLog returns a Log whose first delivery has LSN 1.
func NewLog() *Log { return &Log{next: map[string]types.Offset{}} }

// Part is what one transaction writes to one topic.
type Part struct {
	Topic  string
	Values [][]byte
}

// Txn returns the next delivery (LSN = previous + 1) with one slice per part.
func (l *Log) Txn(parts ...Part) *targetpb.Delivery {
	l.lsn++
	d := &targetpb.Delivery{Lsn: uint64(l.lsn)}
	for _, p := range parts {
		sl := &logstorepb.TxnSlice{Topic: p.Topic, FirstOffset: uint64(l.next[p.Topic])}
		for _, v := range p.Values {
			sl.Messages = append(sl.Messages, &logstorepb.Message{Value: v})
		}
		l.next[p.Topic] += types.Offset(len(p.Values))
		d.Slices = append(d.Slices, sl)
	}
	return d
}

// Progress returns a progress marker at the next LSN.
func (l *Log) Progress() *targetpb.Delivery {
	l.lsn++
	return &targetpb.Delivery{Lsn: uint64(l.lsn)}
}

// SkipLSNs leaves n LSNs out (transactions for other targets).
func (l *Log) SkipLSNs(n uint64) { l.lsn += types.LSN(n) }

// LSN is the LSN of the last delivery generated.
func (l *Log) LSN() types.LSN { return l.lsn }
