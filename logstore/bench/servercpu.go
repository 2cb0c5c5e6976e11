package bench

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"runtime/pprof"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// Server CPU in this process (issue #26; without Config.ServerCommand,
// `bench store --in-process`, and for bare raft): the systems under test
// run in this process beside their clients, so the process's CPU time
// (Row.CPUPerTxn) is the clients' and the servers' together. Every goroutine of a server (a
// LogStore cluster: gRPC server, handlers, aggregator, Raft, FSM, segment
// sealer; the no-op floor server; bare Raft) is started under the pprof
// label bench=server (asServer) and inherits it, so a CPU profile of the
// row splits the servers' samples from the rest (clients, and the Go
// runtime's own goroutines such as GC workers, which carry no label). The
// profile samples at 100 Hz: a figure over a few seconds is an estimate.
// The split is not faithful to a server with a process of its own: the
// heap is shared, so the servers' goroutines pay GC assist for the
// clients' garbage, and the runtime's background GC work is no one's.
// Server processes (child.go) measure it as production runs it.
const serverLabelKey, serverLabelValue = "bench", "server"

// asServer runs start with the server label, so every goroutine it starts
// (and theirs) carries it.
func asServer(start func()) {
	pprof.Do(context.Background(), pprof.Labels(serverLabelKey, serverLabelValue), func(context.Context) { start() })
}

// cpuProfile is a running CPU profile of one row (nil buf: profiling was
// not available, e.g. another profile runs, or not wanted).
type cpuProfile struct{ buf *bytes.Buffer }

func startCPUProfile(want bool) cpuProfile {
	if !want {
		return cpuProfile{}
	}
	buf := &bytes.Buffer{}
	if err := pprof.StartCPUProfile(buf); err != nil {
		return cpuProfile{}
	}
	return cpuProfile{buf: buf}
}

// stop ends the profile and returns the CPU time of samples labelled as
// server's; ok is false when no profile ran or it could not be read.
func (p cpuProfile) stop() (server time.Duration, ok bool) {
	if p.buf == nil {
		return 0, false
	}
	pprof.StopCPUProfile()
	d, err := labelledCPU(p.buf.Bytes(), serverLabelKey, serverLabelValue)
	return d, err == nil
}

// labelledCPU sums the cpu/nanoseconds value of the samples of a gzipped
// pprof profile that carry label key=value. It reads the profile.proto
// fields it needs with protowire (the pprof module is not a dependency):
// Profile.sample_type 1, sample 2, string_table 6; Sample.value 2, label
// 3; Label.key 1, str 2; ValueType.type 1.
func labelledCPU(gz []byte, key, value string) (time.Duration, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return 0, err
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return 0, err
	}
	var types [][]byte // sample_type messages
	var samples [][]byte
	var strs []string
	if err := fields(raw, func(num protowire.Number, v []byte) {
		switch num {
		case 1:
			types = append(types, v)
		case 2:
			samples = append(samples, v)
		case 6:
			strs = append(strs, string(v))
		}
	}, nil); err != nil {
		return 0, err
	}
	str := func(i uint64) string {
		if i < uint64(len(strs)) {
			return strs[i]
		}
		return ""
	}
	cpu := -1
	for i, t := range types {
		_ = fields(t, nil, func(num protowire.Number, x uint64) {
			if num == 1 && str(x) == "cpu" {
				cpu = i
			}
		})
	}
	if cpu < 0 {
		return 0, fmt.Errorf("bench: profile has no cpu sample type")
	}
	var total int64
	for _, s := range samples {
		var values []uint64
		labelled := false
		err := fields(s, func(num protowire.Number, v []byte) {
			switch num {
			case 2: // packed values
				for len(v) > 0 {
					x, n := protowire.ConsumeVarint(v)
					if n < 0 {
						return
					}
					values, v = append(values, x), v[n:]
				}
			case 3:
				var k, sv uint64
				_ = fields(v, nil, func(num protowire.Number, x uint64) {
					switch num {
					case 1:
						k = x
					case 2:
						sv = x
					}
				})
				labelled = labelled || (str(k) == key && str(sv) == value)
			}
		}, func(num protowire.Number, x uint64) {
			if num == 2 {
				values = append(values, x)
			}
		})
		if err != nil {
			return 0, err
		}
		if labelled && cpu < len(values) {
			total += int64(values[cpu])
		}
	}
	return time.Duration(total), nil
}

// fields calls bytesFn for each length-delimited field of msg and
// varintFn for each varint field (either may be nil); other wire types
// are skipped.
func fields(msg []byte, bytesFn func(protowire.Number, []byte), varintFn func(protowire.Number, uint64)) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
		switch typ {
		case protowire.BytesType:
			var v []byte
			if v, n = protowire.ConsumeBytes(msg); n >= 0 && bytesFn != nil {
				bytesFn(num, v)
			}
		case protowire.VarintType:
			var x uint64
			if x, n = protowire.ConsumeVarint(msg); n >= 0 && varintFn != nil {
				varintFn(num, x)
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, msg)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		msg = msg[n:]
	}
	return nil
}
