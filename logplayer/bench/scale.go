package bench

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Per-target cost (issue 13 part 5): heap and RSS over targets, and the
// LogPlayer's CPU per transaction.
//
// Heap: runtime.MemStats.HeapInuse after a forced GC, as a delta from the
// moment the row's targets serve and before any LogPlayer started, so it
// holds what the LogPlayer(s) hold plus what the targets' gRPC servers
// allocate for the streams the LogPlayer opens (server transports and
// stream buffers: about half of it, see docs/BENCHMARKS.md). RSS: VmRSS of
// /proc/self/status, the same delta (RSS is not returned by GC, so it is
// an upper bound of what the process kept).
//
// CPU: a CPU profile of the measured window; the samples of goroutines
// labelled component=player count. The label is set on the goroutine that
// creates and runs the LogPlayer; Go copies labels to every goroutine a
// labelled one starts, so this covers the LogPlayer's own goroutines and
// the gRPC client goroutines its dials start (transport readers and
// writers), not the LogStore's, the targets' or the producers'. 100 Hz
// sampling: a figure, not an exact count.

// playerLabel marks the LogPlayer's goroutines in the CPU profile.
const playerLabel = "component"

// playerLabelValue is playerLabel's value for the LogPlayer.
const playerLabelValue = "player"

// memSnap is the process's memory at one moment.
type memSnap struct {
	heap uint64 // HeapInuse after GC
	rss  uint64 // VmRSS, bytes (0 if unknown)
}

// snapMem forces a GC (twice: finalizers of the first free more) and reads
// the heap in use and the RSS.
func snapMem() memSnap {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnap{heap: ms.HeapInuse, rss: vmRSS()}
}

// perTarget is (s - base) / n in bytes, 0 when it shrank.
func (s memSnap) perTarget(base memSnap, n int) (heap, rss int64) {
	d := func(a, b uint64) int64 {
		if a < b {
			return 0
		}
		return int64(a-b) / int64(n)
	}
	return d(s.heap, base.heap), d(s.rss, base.rss)
}

// vmRSS is this process's resident set in bytes (Linux; 0 elsewhere).
func vmRSS() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) >= 1 {
				kb, err := strconv.ParseUint(fields[0], 10, 64)
				if err == nil {
					return kb * 1024
				}
			}
		}
	}
	return 0
}

// cpuProfile is a running CPU profile of the process.
type cpuProfile struct{ buf bytes.Buffer }

// startCPU starts a CPU profile; nil when one is already running (the
// caller profiles the whole run itself).
func startCPU() *cpuProfile {
	c := &cpuProfile{}
	if err := pprof.StartCPUProfile(&c.buf); err != nil {
		return nil
	}
	return c
}

// stop ends the profile and returns the CPU time of the samples labelled
// playerLabel=playerLabelValue.
func (c *cpuProfile) stop() (int64, error) {
	if c == nil {
		return 0, nil
	}
	pprof.StopCPUProfile()
	return labelledCPU(c.buf.Bytes(), playerLabel, playerLabelValue)
}

// labelledCPU sums the CPU nanoseconds (the last sample value) of the
// samples of a gzipped pprof profile that carry label key=value. A minimal
// reader of profile.proto: Profile.sample = 2 (Sample.value = 2, packed;
// Sample.label = 3: Label.key = 1, Label.str = 2, indexes into
// Profile.string_table = 6).
func labelledCPU(gz []byte, key, value string) (int64, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return 0, fmt.Errorf("cpu profile: %w", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return 0, fmt.Errorf("cpu profile: %w", err)
	}
	var samples []parsedSample
	var strs []string
	errBad := errors.New("cpu profile: malformed protobuf")
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, errBad
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return 0, errBad
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return 0, errBad
		}
		b = b[n:]
		switch num {
		case 2:
			s, err := parseSample(v)
			if err != nil {
				return 0, err
			}
			samples = append(samples, s)
		case 6:
			strs = append(strs, string(v))
		}
	}
	var total int64
	for _, s := range samples {
		if len(s.values) == 0 {
			continue
		}
		for _, l := range s.labels {
			if l[0] >= 0 && l[1] >= 0 && int(l[0]) < len(strs) && int(l[1]) < len(strs) && strs[l[0]] == key && strs[l[1]] == value {
				total += s.values[len(s.values)-1]
				break
			}
		}
	}
	return total, nil
}

// parsedSample is a Sample's values and labels (key and str indexes into
// the string table; -1 if absent).
type parsedSample struct {
	values []int64
	labels [][2]int64
}

func parseSample(b []byte) (parsedSample, error) {
	var s parsedSample
	errBad := errors.New("cpu profile: malformed sample")
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, errBad
		}
		b = b[n:]
		switch {
		case num == 2 && typ == protowire.BytesType: // packed values
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return s, errBad
			}
			b = b[n:]
			for len(v) > 0 {
				x, m := protowire.ConsumeVarint(v)
				if m < 0 {
					return s, errBad
				}
				s.values = append(s.values, int64(x))
				v = v[m:]
			}
		case num == 2 && typ == protowire.VarintType:
			x, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return s, errBad
			}
			b = b[n:]
			s.values = append(s.values, int64(x))
		case num == 3 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return s, errBad
			}
			b = b[n:]
			l := [2]int64{-1, -1}
			for len(v) > 0 {
				f, t, m := protowire.ConsumeTag(v)
				if m < 0 {
					return s, errBad
				}
				v = v[m:]
				if t != protowire.VarintType {
					m = protowire.ConsumeFieldValue(f, t, v)
					if m < 0 {
						return s, errBad
					}
					v = v[m:]
					continue
				}
				x, m := protowire.ConsumeVarint(v)
				if m < 0 {
					return s, errBad
				}
				v = v[m:]
				if f == 1 || f == 2 {
					l[f-1] = int64(x)
				}
			}
			s.labels = append(s.labels, l)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return s, errBad
			}
			b = b[n:]
		}
	}
	return s, nil
}

// asPlayer runs fn on this goroutine with the player label set, so every
// goroutine fn starts carries it (and is counted as the LogPlayer's CPU).
func asPlayer(ctx context.Context, fn func(ctx context.Context)) {
	pprof.Do(ctx, pprof.Labels(playerLabel, playerLabelValue), fn)
}
