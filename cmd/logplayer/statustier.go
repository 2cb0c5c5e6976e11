package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// tierStatus is a node's local and tiered LSN ranges (StatusResponse
// fields 54-59, logstore/tiering.go); nil for a node without tiered
// storage activity.
type tierStatus struct {
	LocalFirstLSN uint64 `json:"local_first_lsn"`
	TierFirstLSN  uint64 `json:"tier_first_lsn"`
	TierLastLSN   uint64 `json:"tier_last_lsn"`
	UploadedBytes uint64 `json:"tier_uploaded_bytes"`
	LagSegments   uint64 `json:"tier_lag_segments"`
	LagBytes      uint64 `json:"tier_lag_bytes"`
}

func newTierStatus(st *logstorepb.StatusResponse) *tierStatus {
	if st.TierLastLsn == 0 && st.TierLagSegments == 0 && st.TierUploadedBytes == 0 {
		return nil
	}
	return &tierStatus{
		LocalFirstLSN: st.LocalFirstLsn, TierFirstLSN: st.TierFirstLsn, TierLastLSN: st.TierLastLsn,
		UploadedBytes: st.TierUploadedBytes, LagSegments: st.TierLagSegments, LagBytes: st.TierLagBytes,
	}
}

// writeTierTable prints the nodes' local and tiered ranges when any node
// has tiered storage.
func (r *statusReport) writeTierTable(w io.Writer) {
	has := false
	for _, n := range r.Nodes {
		has = has || n.Tier != nil
	}
	if !has {
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tLOCAL LSNS\tTIERED LSNS\tUPLOADED\tUPLOAD LAG")
	for _, n := range r.Nodes {
		if t := n.Tier; t != nil {
			tiered := "none"
			if t.TierLastLSN != 0 {
				tiered = fmt.Sprintf("%d..%d", t.TierFirstLSN, t.TierLastLSN)
			}
			fmt.Fprintf(tw, "%s\t%d..%d\t%s\t%s\t%d segments, %s\n", n.ID, t.LocalFirstLSN, n.HeadLSN, tiered,
				humanBytes(t.UploadedBytes), t.LagSegments, humanBytes(t.LagBytes))
		}
	}
	tw.Flush()
}
