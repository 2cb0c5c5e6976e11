package logstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/logplayer/logplayer/proto/logstorepb"
)

// BenchmarkStatusTopics: one Status call on a node holding many topics
// (issue #12 defect 4: Status sorted every topic under the FSM lock and
// walked segments × topics under the segment lock).
func BenchmarkStatusTopics(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("topics=%d", n), func(b *testing.B) {
			c := startCluster(b, 1, nil)
			ls := rawConn(b, c.Nodes[0].APIAddr())
			ctx := ctxT(b, 60*time.Second)
			const perTxn = 2000
			for i := 0; i < n; i += perTxn {
				req := &logstorepb.AppendRequest{}
				for j := i; j < min(n, i+perTxn); j++ {
					req.Slices = append(req.Slices, &logstorepb.Slice{Topic: fmt.Sprintf("topic-%05d", j), Messages: []*logstorepb.Message{{Value: []byte("x")}}})
				}
				if _, err := ls.Append(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var listed int
			for range b.N {
				st, err := ls.Status(ctx, &logstorepb.StatusRequest{})
				if err != nil {
					b.Fatal(err)
				}
				listed = len(st.Topics)
			}
			b.ReportMetric(float64(listed), "topics/resp")
		})
	}
}
