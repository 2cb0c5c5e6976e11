package cli

import (
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
)

// levelValue is a slog level flag.
type levelValue struct{ level slog.Level }

func (v *levelValue) String() string { return strings.ToLower(v.level.String()) }
func (v *levelValue) Set(s string) error {
	switch strings.ToLower(s) {
	case "debug", "info", "warn", "error":
		return v.level.UnmarshalText([]byte(s))
	}
	return fmt.Errorf("want debug, info, warn or error")
}

// ChoiceValue is a string flag limited to a few choices.
type ChoiceValue struct {
	Value   string
	Choices []string
}

func (v *ChoiceValue) String() string { return v.Value }
func (v *ChoiceValue) Set(s string) error {
	if !slices.Contains(v.Choices, s) {
		return fmt.Errorf("want one of %s", strings.Join(v.Choices, ", "))
	}
	v.Value = s
	return nil
}

// AddrValue is one host:port.
type AddrValue struct{ Addr string }

func (v *AddrValue) String() string { return v.Addr }
func (v *AddrValue) Set(s string) error {
	if err := CheckAddr(s); err != nil {
		return err
	}
	v.Addr = s
	return nil
}

// OptAddrValue is a host:port or empty (the feature is off).
type OptAddrValue struct{ AddrValue }

func (v *OptAddrValue) Set(s string) error {
	if s == "" {
		v.Addr = ""
		return nil
	}
	return v.AddrValue.Set(s)
}

// CheckAddr checks that s is a host:port with a host and a valid port.
func CheckAddr(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("want host:port")
	}
	if host == "" {
		return fmt.Errorf("want host:port with a host (e.g. 127.0.0.1:%s)", port)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// AddrList is a comma-separated list of host:port; each Set replaces the
// list from the default but repeated flags add up.
type AddrList struct{ StringList }

// NewAddrList is an AddrList whose default is def.
func NewAddrList(def ...string) AddrList { return AddrList{StringList{Items: def}} }

func (v *AddrList) Set(s string) error {
	if err := v.StringList.Set(s); err != nil {
		return err
	}
	for _, a := range v.Items {
		if err := CheckAddr(a); err != nil {
			return fmt.Errorf("%q: %v", a, err)
		}
	}
	if len(v.Items) == 0 {
		return fmt.Errorf("want at least one host:port")
	}
	return nil
}

// StringList is a comma-separated list of names; the first Set replaces the
// default, repeated flags add up.
type StringList struct {
	Items []string
	Given bool // some Set replaced the default
}

func (v *StringList) String() string { return strings.Join(v.Items, ",") }
func (v *StringList) Set(s string) error {
	if !v.Given {
		v.Items, v.Given = nil, true
	}
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			v.Items = append(v.Items, it)
		}
	}
	return nil
}

// Repeatable marks StringList a RepeatableValue.
func (*StringList) Repeatable() {}

// SizeValue is a byte size: a number with an optional KiB, MiB or GiB
// suffix ("64MiB", "4096").
type SizeValue struct{ Bytes int64 }

func (v *SizeValue) String() string {
	switch b := v.Bytes; {
	case b != 0 && b%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", b>>30)
	case b != 0 && b%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", b>>20)
	case b != 0 && b%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", b>>10)
	default:
		return strconv.FormatInt(b, 10)
	}
}

func (v *SizeValue) Set(s string) error {
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return fmt.Errorf("want a byte size such as 4096, 64KiB, 16MiB or 1GiB")
	}
	v.Bytes = n * mult
	return nil
}

// PeerList is the repeatable --peer ID=RAFT_ADDR/API_ADDR.
type PeerList struct{ Peers []Peer }

// Peer is one --peer: a Raft voter's id and addresses.
type Peer struct{ ID, RaftAddr, APIAddr string }

func (v *PeerList) String() string {
	var parts []string
	for _, p := range v.Peers {
		parts = append(parts, p.ID+"="+p.RaftAddr+"/"+p.APIAddr)
	}
	return strings.Join(parts, " ")
}

func (v *PeerList) Set(s string) error {
	id, addrs, ok := strings.Cut(s, "=")
	raftAddr, apiAddr, ok2 := strings.Cut(addrs, "/")
	if !ok || !ok2 || id == "" {
		return fmt.Errorf("want ID=RAFT_ADDR/API_ADDR, e.g. n1=127.0.0.1:7410/127.0.0.1:7400")
	}
	for _, a := range []string{raftAddr, apiAddr} {
		if err := CheckAddr(a); err != nil {
			return fmt.Errorf("%q: %v", a, err)
		}
	}
	for _, p := range v.Peers {
		if p.ID == id {
			return fmt.Errorf("peer %q given twice", id)
		}
	}
	v.Peers = append(v.Peers, Peer{ID: id, RaftAddr: raftAddr, APIAddr: apiAddr})
	return nil
}

// Repeatable marks PeerList a RepeatableValue.
func (*PeerList) Repeatable() {}

// IntList is a comma-separated list of positive integers ("1,10,64").
type IntList struct{ Ints []int }

func (v *IntList) String() string {
	parts := make([]string, len(v.Ints))
	for i, n := range v.Ints {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (v *IntList) Set(s string) error {
	var ints []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n <= 0 {
			return fmt.Errorf("want positive integers separated by commas, e.g. 1,10,64")
		}
		ints = append(ints, n)
	}
	v.Ints = ints
	return nil
}
