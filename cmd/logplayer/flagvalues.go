package main

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

// choiceValue is a string flag limited to a few choices.
type choiceValue struct {
	value   string
	choices []string
}

func (v *choiceValue) String() string { return v.value }
func (v *choiceValue) Set(s string) error {
	if !slices.Contains(v.choices, s) {
		return fmt.Errorf("want one of %s", strings.Join(v.choices, ", "))
	}
	v.value = s
	return nil
}

// addrValue is one host:port.
type addrValue struct{ addr string }

func (v *addrValue) String() string { return v.addr }
func (v *addrValue) Set(s string) error {
	if err := checkAddr(s); err != nil {
		return err
	}
	v.addr = s
	return nil
}

// optAddrValue is a host:port or empty (the feature is off).
type optAddrValue struct{ addrValue }

func (v *optAddrValue) Set(s string) error {
	if s == "" {
		v.addr = ""
		return nil
	}
	return v.addrValue.Set(s)
}

func checkAddr(s string) error {
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

// addrList is a comma-separated list of host:port; each Set replaces the
// list from the default but repeated flags add up.
type addrList struct{ stringList }

func newAddrList(def ...string) addrList { return addrList{stringList{items: def}} }

func (v *addrList) Set(s string) error {
	if err := v.stringList.Set(s); err != nil {
		return err
	}
	for _, a := range v.items {
		if err := checkAddr(a); err != nil {
			return fmt.Errorf("%q: %v", a, err)
		}
	}
	if len(v.items) == 0 {
		return fmt.Errorf("want at least one host:port")
	}
	return nil
}

// stringList is a comma-separated list of names; the first Set replaces the
// default, repeated flags add up.
type stringList struct {
	items []string
	set   bool
}

func (v *stringList) String() string { return strings.Join(v.items, ",") }
func (v *stringList) Set(s string) error {
	if !v.set {
		v.items, v.set = nil, true
	}
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			v.items = append(v.items, it)
		}
	}
	return nil
}
func (*stringList) repeatable() {}

// sizeValue is a byte size: a number with an optional KiB, MiB or GiB
// suffix ("64MiB", "4096").
type sizeValue struct{ bytes int64 }

func (v *sizeValue) String() string {
	switch b := v.bytes; {
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

func (v *sizeValue) Set(s string) error {
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
	v.bytes = n * mult
	return nil
}

// peerList is the repeatable --peer ID=RAFT_ADDR/API_ADDR.
type peerList struct{ peers []peer }

type peer struct{ id, raftAddr, apiAddr string }

func (v *peerList) String() string {
	var parts []string
	for _, p := range v.peers {
		parts = append(parts, p.id+"="+p.raftAddr+"/"+p.apiAddr)
	}
	return strings.Join(parts, " ")
}

func (v *peerList) Set(s string) error {
	id, addrs, ok := strings.Cut(s, "=")
	raftAddr, apiAddr, ok2 := strings.Cut(addrs, "/")
	if !ok || !ok2 || id == "" {
		return fmt.Errorf("want ID=RAFT_ADDR/API_ADDR, e.g. n1=127.0.0.1:7410/127.0.0.1:7400")
	}
	for _, a := range []string{raftAddr, apiAddr} {
		if err := checkAddr(a); err != nil {
			return fmt.Errorf("%q: %v", a, err)
		}
	}
	for _, p := range v.peers {
		if p.id == id {
			return fmt.Errorf("peer %q given twice", id)
		}
	}
	v.peers = append(v.peers, peer{id: id, raftAddr: raftAddr, apiAddr: apiAddr})
	return nil
}
func (*peerList) repeatable() {}

// intList is a comma-separated list of positive integers ("1,10,64").
type intList struct{ ints []int }

func (v *intList) String() string {
	parts := make([]string, len(v.ints))
	for i, n := range v.ints {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (v *intList) Set(s string) error {
	var ints []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n <= 0 {
			return fmt.Errorf("want positive integers separated by commas, e.g. 1,10,64")
		}
		ints = append(ints, n)
	}
	v.ints = ints
	return nil
}
