//go:build netns

package e2e

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNemesisNetns is TestNemesis on real network partitions (go test
// -tags netns ./e2e -run NemesisNetns, as root; the same -seed, -duration
// and -nemesis-plaintext flags): each store node and the LogPlayer run in
// their own network namespace (ip netns exec), each with a veth pair into
// one bridge, which lives in a hub namespace of its own (so the host's
// firewall, which may drop bridged or forwarded packets, is never
// touched); the test process and the shards stay in the host's namespace,
// on the host end of a veth pair into the same bridge. The nemesis cuts a
// link with iptables DROP rules inside the namespace of the node it cuts:
// every packet to and from the other store nodes (the leader isolated, or
// a 1/2 split), or the LogPlayer's packets to and from one shard's port
// (that target cut from the LogPlayer only; the test still reaches it).
// Unlike the proxies, a cut connection stays open on both sides with its
// packets lost, until TCP or gRPC keepalive gives up, as in a real
// partition. Namespaces left by an earlier run are removed first (by
// netnsPrefix); this run's are removed at cleanup. If the namespaces
// cannot be made (not root, no iproute2 or iptables) the test fails with
// what failed.
func TestNemesisNetns(t *testing.T) {
	runSeeds(t, "TestNemesisNetns", "netns", func(t *testing.T) faultNet { return newNetnsNet(t) })
}

// netnsPrefix names every namespace and host link the test makes.
const netnsPrefix = "lpnem-"

// The addresses: one /24, the host end at .254, store node i at .i+1, the
// LogPlayer at .10. Every process in a namespace has its namespace's
// address to itself, so the ports are fixed.
const (
	netnsSubnet   = "10.213.77."
	netnsHostIP   = netnsSubnet + "254"
	netnsPlayerIP = netnsSubnet + "10"
	netnsMask     = "/24"
	netnsAPIPort  = 7000
	netnsRaftPort = 7001
	netnsMetrics  = 7002
	netnsAdmin    = 7100
)

// netnsCmdMax bounds one ip or iptables command.
const netnsCmdMax = 30 * time.Second

// netnsNet is the faultNet of namespaces (see TestNemesisNetns).
type netnsNet struct {
	t      testing.TB
	shards []string // shard i's address on the host end
	mu     sync.Mutex
}

func storeNS(i int) string { return fmt.Sprintf("%sn%d", netnsPrefix, i+1) }
func storeIP(i int) string { return fmt.Sprintf("%s%d", netnsSubnet, i+1) }

const (
	playerNS = netnsPrefix + "player"
	hubNS    = netnsPrefix + "hub"
	hostLink = netnsPrefix + "host" // the host end of the host's veth pair
)

// netnsRun runs one command and returns its combined output.
func netnsRun(args ...string) (string, error) {
	cmd := exec.Command(args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return out.String(), fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
		}
		return out.String(), nil
	case <-time.After(netnsCmdMax):
		_ = cmd.Process.Kill()
		<-done
		return out.String(), fmt.Errorf("%s: did not finish within %v", strings.Join(args, " "), netnsCmdMax)
	}
}

// netnsSweep removes every namespace and host link named by netnsPrefix
// (an earlier run's, killed before its cleanup); it returns what it could
// not remove.
func netnsSweep() error {
	var errs []string
	out, err := netnsRun("ip", "netns", "list")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], netnsPrefix) {
			if _, err := netnsRun("ip", "netns", "del", f[0]); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if out, err = netnsRun("ip", "-o", "link", "show"); err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, netnsPrefix) || strings.HasPrefix(name, "lpv") {
			// A namespace's deletion removes its veths' peers shortly
			// after: this one may be gone already.
			if _, err := netnsRun("ip", "link", "del", name); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// newNetnsNet sweeps stale namespaces, makes the hub with its bridge, one
// namespace per store node and one for the LogPlayer, each on a veth pair
// into the bridge, and the host's pair; removed at cleanup. It fails t
// with the command that failed.
func newNetnsNet(t *testing.T) *netnsNet {
	t.Helper()
	fail := func(err error) {
		t.Fatalf("network namespaces: %v (the netns variant runs as root with iproute2 and iptables; "+
			"without them run TestNemesis, which partitions through in-test proxies)", err)
	}
	if err := netnsSweep(); err != nil {
		fail(fmt.Errorf("removing an earlier run's namespaces: %w", err))
	}
	t.Cleanup(func() {
		if err := netnsSweep(); err != nil {
			t.Errorf("network namespaces: cleanup: %v", err)
		}
	})
	var cmds [][]string
	run := func(args ...string) { cmds = append(cmds, args) }
	run("ip", "netns", "add", hubNS)
	run("ip", "-n", hubNS, "link", "set", "lo", "up")
	run("ip", "-n", hubNS, "link", "add", "br0", "type", "bridge")
	run("ip", "-n", hubNS, "link", "set", "br0", "up")
	// attach makes veth pair (name in ns as eth0 with ip, the other end on
	// the hub's bridge); ns "" is the host.
	attach := func(k int, ns, ip string) {
		inner, outer := fmt.Sprintf("lpv%di", k), fmt.Sprintf("lpv%do", k)
		run("ip", "link", "add", inner, "type", "veth", "peer", "name", outer)
		run("ip", "link", "set", outer, "netns", hubNS)
		run("ip", "-n", hubNS, "link", "set", outer, "master", "br0", "up")
		if ns == "" {
			run("ip", "link", "set", inner, "name", hostLink)
			run("ip", "addr", "add", ip+netnsMask, "dev", hostLink)
			run("ip", "link", "set", hostLink, "up")
			return
		}
		run("ip", "netns", "add", ns)
		run("ip", "-n", ns, "link", "set", "lo", "up")
		run("ip", "link", "set", inner, "netns", ns)
		run("ip", "-n", ns, "link", "set", inner, "name", "eth0")
		run("ip", "-n", ns, "addr", "add", ip+netnsMask, "dev", "eth0")
		run("ip", "-n", ns, "link", "set", "eth0", "up")
	}
	attach(0, "", netnsHostIP)
	for i := range storeNodes {
		attach(i+1, storeNS(i), storeIP(i))
	}
	attach(storeNodes+1, playerNS, netnsPlayerIP)
	for _, c := range cmds {
		if _, err := netnsRun(c...); err != nil {
			fail(err)
		}
	}
	// iptables works in every namespace that will be cut.
	for _, ns := range []string{storeNS(0), playerNS} {
		if _, err := netnsRun("ip", "netns", "exec", ns, "iptables", "-w", "-S"); err != nil {
			fail(err)
		}
	}
	nn := &netnsNet{t: t}
	for range shardCount {
		_, port, err := net.SplitHostPort(freeAddr(t))
		if err != nil {
			t.Fatal(err)
		}
		nn.shards = append(nn.shards, net.JoinHostPort(netnsHostIP, port))
	}
	return nn
}

func (nn *netnsNet) name() string {
	return fmt.Sprintf("network namespaces %s* (store nodes %s1-3, LogPlayer %s, host and shards %s), iptables DROP",
		netnsPrefix, netnsSubnet, netnsPlayerIP, netnsHostIP)
}

func (nn *netnsNet) store(i int) (string, string, string) {
	ip := storeIP(i)
	return fmt.Sprintf("%s:%d", ip, netnsAPIPort), fmt.Sprintf("%s:%d", ip, netnsRaftPort), fmt.Sprintf("%s:%d", ip, netnsMetrics)
}

func (nn *netnsNet) peerRaft(_, j int) string {
	_, raft, _ := nn.store(j)
	return raft
}

func (nn *netnsNet) shard(i int) (string, string) { return nn.shards[i], nn.shards[i] }

func (nn *netnsNet) sink() (string, string) {
	_, port, err := net.SplitHostPort(freeAddr(nn.t))
	if err != nil {
		nn.t.Fatal(err)
	}
	addr := net.JoinHostPort(netnsHostIP, port)
	return addr, addr
}

func (nn *netnsNet) player() (string, string) {
	return fmt.Sprintf("%s:%d", netnsPlayerIP, netnsAdmin), fmt.Sprintf("%s:%d", netnsPlayerIP, netnsAdmin+1)
}

func (nn *netnsNet) wrap(i int) []string {
	ns := playerNS
	if i >= 0 {
		ns = storeNS(i)
	}
	return []string{"ip", "netns", "exec", ns}
}

func (nn *netnsNet) hosts() []string {
	out := []string{netnsHostIP, netnsPlayerIP}
	for i := range storeNodes {
		out = append(out, storeIP(i))
	}
	return out
}

// iptables runs one iptables command in ns; a failure fails the test (a
// cut that did not happen, or a heal that did not, would make the run
// meaningless).
func (nn *netnsNet) iptables(ns string, args ...string) {
	nn.t.Helper()
	if _, err := netnsRun(append([]string{"ip", "netns", "exec", ns, "iptables", "-w"}, args...)...); err != nil {
		nn.t.Fatalf("network namespaces: %v", err)
	}
}

func (nn *netnsNet) isolate(i int, cut bool) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	ns := storeNS(i)
	if !cut {
		nn.iptables(ns, "-F", "INPUT")
		nn.iptables(ns, "-F", "OUTPUT")
		return
	}
	for j := range storeNodes {
		if j != i {
			nn.iptables(ns, "-A", "INPUT", "-s", storeIP(j), "-j", "DROP")
			nn.iptables(ns, "-A", "OUTPUT", "-d", storeIP(j), "-j", "DROP")
		}
	}
}

func (nn *netnsNet) cutTarget(i int, cut bool) {
	nn.mu.Lock()
	defer nn.mu.Unlock()
	if !cut {
		nn.iptables(playerNS, "-F", "INPUT")
		nn.iptables(playerNS, "-F", "OUTPUT")
		return
	}
	_, port, _ := net.SplitHostPort(nn.shards[i])
	nn.iptables(playerNS, "-A", "OUTPUT", "-d", netnsHostIP, "-p", "tcp", "--dport", port, "-j", "DROP")
	nn.iptables(playerNS, "-A", "INPUT", "-s", netnsHostIP, "-p", "tcp", "--sport", port, "-j", "DROP")
}
