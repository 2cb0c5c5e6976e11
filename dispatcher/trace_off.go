//go:build !tlatrace

package dispatcher

import (
	"github.com/logplayer/logplayer/proto/logstorepb"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// Trace hooks without the tlatrace build tag: constant false guards every
// call site, so the compiler drops them (see trace_on.go).

const traceOn = false

func (d *Dispatcher) traceTargets()                                                           {}
func (d *Dispatcher) traceDispatch(*logstorepb.Transaction, []string, []string)               {}
func (d *Dispatcher) traceReturn(string, *Recovery)                                           {}
func (d *Dispatcher) tracePushCatchup(string, types.Term, types.LSN, *targetqueue.PushResult) {}
func (d *Dispatcher) traceFetchingCompleted(string, types.Term, *bool)                        {}
func (d *Dispatcher) traceSuspend(string)                                                     {}
func (d *Dispatcher) traceNextBatch(string, types.Term, int, *[]targetqueue.Msg, *bool)       {}
func (d *Dispatcher) traceAck(string, types.Term, types.LSN, *error)                          {}
func (d *Dispatcher) traceProgress(string, *bool)                                             {}
