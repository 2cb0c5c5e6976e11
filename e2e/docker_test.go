//go:build docker

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/proto/shardpb"
)

// Ports inside the containers (the README's defaults).
const (
	ctrAPIPort     = "7400"
	ctrRaftPort    = "7410"
	ctrShardPort   = "7430"
	ctrMetricsPort = "9400"
)

// dockerCmdMax bounds one docker CLI call (an image build on a loaded
// machine included).
const dockerCmdMax = 2 * time.Minute

// dockerPhaseAcks is cluster.phaseAcks in containers (a few seconds of
// load: fsync through the container's storage is slow).
const dockerPhaseAcks = 100

// crashCheckEvery throttles the containers' liveness check (a docker
// inspect of every container).
const crashCheckEvery = time.Second

// TestDockerPartition runs the system in containers, FROM scratch with the
// static binary (deploy/Dockerfile), on a private bridge network created for
// the test: 3 store nodes, a LogPlayer, 3 shards. Only the store APIs and
// the shards' gRPC and metrics ports are published, on 127.0.0.1. The
// workload runs on the host. Faults: the LogStore leader is cut off the
// network (docker network disconnect) while writes go on on the majority,
// then healed; a shard is cut off (its stream hangs instead of breaking)
// and healed; the LogPlayer is cut off from everything and healed; a shard
// container is killed and started again. Then the
// same checks as TestRealProcessesUnderFaults. Everything the test created
// (containers, their volumes, the network, the image) is removed at the end.
func TestDockerPartition(t *testing.T) {
	s := dockerSeed(t)
	began := time.Now()

	d := startDocker(t)
	t.Logf("%v: image built, containers up", since(began))
	c := d.c
	// A partitioned shard keeps the stream the LogPlayer gave up on open
	// until the LogPlayer's new stream supersedes it: refused with reason
	// superseded, the target doing its job.
	refusals := watchRefusals(t, c.shards, "superseded")
	ld := startLoad(t, c.client, c.shards, s)
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
	t.Logf("%v: cluster up, %d acknowledged", since(began), ld.acks.n.Load())

	// The leader cut off: the majority elects another and goes on; the old
	// leader's uncommitted tail (if any) is replaced when it returns.
	st, old := c.leader()
	d.disconnect(old.id)
	c.waitNewLeader(old, st)
	c.waitAcked(ld)
	t.Logf("%v: leader %s partitioned, writes went on", since(began), old.id)
	d.connect(old.id)
	c.waitRejoined(old)
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
	t.Logf("%v: %s healed and caught up", since(began), old.id)

	// A shard cut off: the LogPlayer's stream to it goes silent, no reset;
	// keepalive must find out. Healed once the LogPlayer suspended it.
	cut := c.shards[1]
	label := fmt.Sprintf("target=%q", cut.id)
	suspends := c.mustPlayerMetric("logplayer_target_suspends_total", label)
	returns := c.mustPlayerMetric("logplayer_target_returns_total", label)
	d.disconnect(cut.id)
	c.waitAcked(ld)
	c.waitPlayerMetric(silentMax, "logplayer_target_suspends_total", label, suspends)
	t.Logf("%v: %s partitioned, suspended by the LogPlayer", since(began), cut.id)
	d.connect(cut.id)
	c.waitPlayerMetric(progressMax, "logplayer_target_returns_total", label, returns)
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
	t.Logf("%v: %s healed, returned and caught up", since(began), cut.id)

	// The LogPlayer cut off: every target stream and the main stream go
	// silent; healed once it gave up on all its targets (its metrics
	// endpoint is cut off too, so its log tells).
	since0 := time.Now()
	returned := map[string]float64{}
	for _, s := range c.shards {
		returned[s.id] = c.mustPlayerMetric("logplayer_target_returns_total", fmt.Sprintf("target=%q", s.id))
	}
	d.disconnect("player")
	c.waitAcked(ld)
	c.waitFor(silentMax, "the partitioned LogPlayer to give up on every target stream", func() error {
		return d.loggedFor("player", since0, streamEndedLog, c.shards)
	})
	d.connect("player")
	for _, s := range c.shards {
		label := fmt.Sprintf("target=%q", s.id)
		c.waitPlayerMetric(progressMax, "logplayer_target_returns_total", label, returned[s.id])
	}
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
	t.Logf("%v: LogPlayer partitioned, healed, every target returned and caught up", since(began))

	// A shard container killed and started again on its volume.
	killed := c.shards[0]
	refusals.kill(killed, func() { d.docker("kill", d.name(killed.id)) })
	c.waitAcked(ld)
	d.docker("start", d.name(killed.id))
	c.waitAcked(ld)
	c.waitTargetsApplied(ld.acks.max.Load())
	t.Logf("%v: %s killed and restarted", since(began), killed.id)

	c.waitAcked(ld)
	verify(t, began, c, ld, refusals, func() {
		for _, sh := range c.shards {
			d.docker("stop", "-t", "10", d.name(sh.id))
			sh.dir = filepath.Join(t.TempDir(), sh.id)
			d.docker("cp", d.name(sh.id)+":/data/.", sh.dir)
		}
	})
}

// dockerSeed fails t unless a Docker engine works and the binary is the
// static one, and returns the workload's seed (-seed, or drawn and
// printed).
func dockerSeed(t *testing.T) uint64 {
	t.Helper()
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Fatalf("docker info: %v: this test needs a working Docker engine\n%s", err, out)
	}
	if *binaryRace {
		t.Fatal("-binary-race builds a dynamically linked binary; the image needs the static one")
	}
	s := *seed
	if s == 0 {
		s = mrand.Uint64()
	}
	t.Logf("seed %d (rerun with -seed %d)", s, s)
	return s
}

// dockerSystem is the containers of one test, named <prefix>-<alias>.
type dockerSystem struct {
	t       testing.TB
	prefix  string
	image   string
	network string
	more    []string          // more networks of the test (removed after the containers)
	ips     map[string]string // alias -> static IP on the network
	aliases []string          // every container, in start order
	tlsDir  string            // copied to /tls in every container
	c       *cluster

	crashMu   sync.Mutex
	lastCheck time.Time // of crashed
	lastLogs  time.Time // of loggedFor
}

func startDocker(t *testing.T) *dockerSystem {
	d := newDockerSystem(t)
	d.createNetwork()

	c := &cluster{t: t, dir: t.TempDir(), crashed: d.crashed, phaseAcks: dockerPhaseAcks, playerMetrics: freeAddr(t)}
	d.startStores(c, []string{"player"})
	player := append(c.playerArgs(), "--admin-addr", "player:7420", "--metrics-addr", "player:"+ctrMetricsPort)
	for i := range shardCount {
		alias := fmt.Sprintf("shard%d", i)
		s := d.startShard(c, i, d.network, d.ips[alias])
		player = append(player, "--target", fmt.Sprintf("%s=%s:%s/%s", s.id, alias, ctrShardPort, s.id))
	}
	d.run("player", "player", []string{c.playerMetrics + ":" + ctrMetricsPort}, player...)
	d.c = c
	return d
}

// startStores writes c's TLS material (node certificates valid for the
// store and shard aliases and for more), starts 3 store nodes on d.network
// and connects c's client to them through their published API ports.
func (d *dockerSystem) startStores(c *cluster, more []string) {
	t := d.t
	stores := []string{"store1", "store2", "store3"}
	var peers []string
	d.tlsDir = filepath.Join(c.dir, "tls")
	c.tls = writeTLS(t, d.tlsDir, "/tls", append(append(more, stores...), "shard0", "shard1", "shard2"))
	hostAddr := map[string]string{} // in-network address -> published 127.0.0.1 address
	for i, alias := range stores {
		n := &storeNode{id: fmt.Sprintf("n%d", i+1), api: alias + ":" + ctrAPIPort, raft: alias + ":" + ctrRaftPort}
		peers = append(peers, "--peer", fmt.Sprintf("%s=%s/%s", n.id, n.raft, n.api))
		hostAddr[n.api] = freeAddr(t)
		c.stores = append(c.stores, n)
	}
	for i, n := range c.stores {
		args := []string{"store", "--id", n.id, "--data-dir", "/data", "--raft-addr", n.raft, "--api-addr", n.api,
			"--heartbeat-timeout", raftHeartbeat.String(), "--election-timeout", raftElection.String()}
		args = append(args, c.tls.args(n.id)...)
		d.run(stores[i], n.id, []string{hostAddr[n.api] + ":" + ctrAPIPort}, append(args, peers...)...)
	}
	// The host reaches a node by the address the cluster advertises for it
	// (NOT_LEADER names the leader's): a resolver maps it to the published
	// port.
	c.connect(grpc.WithResolvers(mapResolver(hostAddr)))
}

// startShard starts shard i on network at ip, its API and metrics
// published, and adds it to c.shards. Extra args (e.g. --log-format) go
// to its command line.
func (d *dockerSystem) startShard(c *cluster, i int, network, ip string, extra ...string) *shardNode {
	t := d.t
	alias := fmt.Sprintf("shard%d", i)
	s := &shardNode{id: demo.ShardTopic(i), addr: freeAddr(t), metrics: freeAddr(t)}
	args := append([]string{"shard", "--id", s.id, "--addr", alias + ":" + ctrShardPort, "--data-dir", "/data", "--metrics-addr", alias + ":" + ctrMetricsPort},
		c.tls.args(s.id)...)
	d.runOn(network, ip, alias, s.id, []string{s.addr + ":" + ctrShardPort, s.metrics + ":" + ctrMetricsPort}, append(args, extra...)...)
	s.client = shardpb.NewShardClient(dial(t, s.addr, c.tls.dialOptions(t)...))
	c.shards = append(c.shards, s)
	return s
}

// newDockerSystem names the test's containers, network and image, builds
// the image (the static binary on an empty base) and removes all of them
// at cleanup.
func newDockerSystem(t *testing.T) *dockerSystem {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	d := &dockerSystem{t: t, prefix: "lpe2e-" + hex.EncodeToString(b[:]), ips: map[string]string{}}
	d.image = d.prefix + ":test"
	d.network = d.prefix
	t.Cleanup(d.teardown)

	bctx := t.TempDir()
	bin, err := os.ReadFile(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bctx, "logplayer"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	d.docker("build", "-q", "-f", "../deploy/Dockerfile", "-t", d.image, bctx)
	return d
}

// name is the container of the component with id (a store node "n1", a
// shard "shard-0", or "player"), or of alias.
func (d *dockerSystem) name(id string) string {
	return d.prefix + "-" + d.alias(id)
}

func (d *dockerSystem) alias(id string) string {
	switch {
	case strings.HasPrefix(id, "n"):
		return "store" + id[1:]
	case strings.HasPrefix(id, "shard-"):
		return "shard" + strings.TrimPrefix(id, "shard-")
	}
	return id
}

// docker runs the docker CLI and returns its stdout; a failure fails t.
func (d *dockerSystem) docker(args ...string) string {
	d.t.Helper()
	out, err := d.tryDocker(args...)
	if err != nil {
		d.t.Fatal(err)
	}
	return out
}

func (d *dockerSystem) tryDocker(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), dockerCmdMax)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// createNetwork creates the test's bridge network (newNetwork) and gives
// every component a static address on it.
func (d *dockerSystem) createNetwork() {
	ip := d.newNetwork(d.network)
	for _, alias := range []string{"store1", "store2", "store3", "shard0", "shard1", "shard2", "player"} {
		d.ips[alias] = ip.String()
		ip = ip.Next()
	}
}

// newNetwork creates the bridge network name with a subnet of Docker's
// choosing (one that collides with nothing on the host), made explicit so
// that containers keep static addresses across a disconnect and a restart
// (a node binds its advertised name's address). It returns the first
// address it leaves to the test's containers.
func (d *dockerSystem) newNetwork(name string) netip.Addr {
	d.docker("network", "create", name)
	subnet := d.docker("network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}} {{end}}", name)
	d.docker("network", "rm", name)
	prefix, err := netip.ParsePrefix(strings.Fields(subnet + " ")[0])
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 24 {
		d.t.Fatalf("docker chose subnet %q: want an IPv4 /24 or larger", subnet)
	}
	d.docker("network", "create", "--subnet", prefix.String(), name)
	ip := prefix.Addr()
	for range 10 { // the gateway takes .1
		ip = ip.Next()
	}
	return ip
}

// run starts the container of the component with id on the network at its
// static address, publishing each "127.0.0.1:HOSTPORT:PORT" of publish.
func (d *dockerSystem) run(alias, id string, publish []string, args ...string) {
	d.t.Helper()
	d.runOn(d.network, d.ips[alias], alias, id, publish, args...)
}

// runOn is run with the container on network at ip (its first network:
// its host name resolves to ip inside it).
func (d *dockerSystem) runOn(network, ip, alias, id string, publish []string, args ...string) {
	d.t.Helper()
	run := []string{"create", "--name", d.name(id), "--hostname", alias,
		"--network", network, "--ip", ip, "--network-alias", alias,
		"--label", "logplayer-e2e=" + d.prefix}
	for _, p := range publish {
		run = append(run, "-p", p)
	}
	run = append(run, d.image)
	d.docker(append(run, args...)...)
	d.aliases = append(d.aliases, alias)
	// The TLS material, copied (not mounted: the engine may not share the
	// test's file system).
	d.docker("cp", d.tlsDir+"/.", d.name(id)+":/tls")
	d.docker("start", d.name(id))
}

// disconnect cuts the component with id off the network (a partition: its
// peers' packets are dropped, its published ports stop answering).
func (d *dockerSystem) disconnect(id string) {
	d.t.Helper()
	d.docker("network", "disconnect", d.network, d.name(id))
}

// connect heals disconnect: same address, same name.
func (d *dockerSystem) connect(id string) {
	d.t.Helper()
	a := d.alias(id)
	d.docker("network", "connect", "--ip", d.ips[a], "--alias", a, d.network, d.name(id))
}

// streamEndedLog is what the LogPlayer logs when it gives up on a target's
// stream (package logplayer, runner.go).
const streamEndedLog = "target stream ended, reconnecting"

// loggedFor returns nil once the container of id logged msg about every
// shard (a line with msg and target=<shard id>) since from. Throttled like
// crashed (one docker logs a second).
func (d *dockerSystem) loggedFor(id string, from time.Time, msg string, shards []*shardNode) error {
	d.crashMu.Lock()
	wait := crashCheckEvery - time.Since(d.lastLogs)
	d.crashMu.Unlock()
	if wait > 0 {
		return fmt.Errorf("not read yet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), dockerCmdMax)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "logs", "--since", from.Format(time.RFC3339Nano), d.name(id)).CombinedOutput()
	d.crashMu.Lock()
	d.lastLogs = time.Now()
	d.crashMu.Unlock()
	if err != nil {
		return fmt.Errorf("docker logs %s: %v: %s", id, err, out)
	}
	var missing []string
	for _, s := range shards {
		found := false
		for _, l := range strings.Split(string(out), "\n") {
			found = found || strings.Contains(l, msg) && strings.Contains(l, "target="+s.id)
		}
		if !found {
			missing = append(missing, s.id)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no %q about %v yet", msg, missing)
	}
	return nil
}

// crashed names a container that is not running (the test stops them only
// through docker kill, which it follows by docker start). Throttled: it
// answers nil between two checks.
func (d *dockerSystem) crashed() error {
	d.crashMu.Lock()
	defer d.crashMu.Unlock()
	if time.Since(d.lastCheck) < crashCheckEvery {
		return nil
	}
	d.lastCheck = time.Now()
	for _, a := range d.aliases {
		out, err := d.tryDocker("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", d.prefix+"-"+a)
		if err != nil {
			return err
		}
		if !strings.HasPrefix(out, "running") && !strings.HasPrefix(out, "exited 137") { // 137: our docker kill
			logs, _ := d.tryDocker("logs", "--tail", fmt.Sprint(logTailLines), d.prefix+"-"+a)
			return fmt.Errorf("container %s is %s; its log ends:\n%s", a, out, logs)
		}
	}
	return nil
}

// teardown prints the containers' logs when the test failed, then removes
// everything the test created. Errors are reported, never fatal: the rest
// must still go.
func (d *dockerSystem) teardown() {
	ids, _ := d.tryDocker("ps", "-aq", "--filter", "label=logplayer-e2e="+d.prefix)
	for _, a := range d.aliases {
		if d.t.Failed() {
			out, err := exec.Command("docker", "logs", "--tail", fmt.Sprint(logTailLines), d.prefix+"-"+a).CombinedOutput()
			d.t.Logf("--- last %d lines of container %s (err %v):\n%s", logTailLines, a, err, out)
		}
	}
	if ids != "" {
		if _, err := d.tryDocker(append([]string{"rm", "-f", "-v"}, strings.Fields(ids)...)...); err != nil {
			d.t.Error(err)
		}
	}
	for _, n := range append([]string{d.network}, d.more...) {
		if _, err := d.tryDocker("network", "rm", n); err != nil && !strings.Contains(err.Error(), "No such network") && !strings.Contains(err.Error(), "not found") {
			d.t.Error(err)
		}
	}
	if _, err := d.tryDocker("rmi", "-f", d.image); err != nil && !strings.Contains(err.Error(), "No such image") {
		d.t.Error(err)
	}
}

// mapResolver resolves the addresses of m (host:port names of the
// containers' network) to their published 127.0.0.1 addresses, and any
// other address to itself. It registers as "dns", the scheme grpc.NewClient
// uses for a target without one; it is local to the connections dialed with
// it (grpc.WithResolvers).
type mapResolver map[string]string

func (m mapResolver) Scheme() string { return "dns" }

func (m mapResolver) Build(target resolver.Target, cc resolver.ClientConn, _ resolver.BuildOptions) (resolver.Resolver, error) {
	addr := target.Endpoint()
	if a, ok := m[addr]; ok {
		addr = a
	}
	return fixedResolver{}, cc.UpdateState(resolver.State{Addresses: []resolver.Address{{Addr: addr}}})
}

// fixedResolver has nothing to re-resolve: the mapping is static.
type fixedResolver struct{}

func (fixedResolver) ResolveNow(resolver.ResolveNowOptions) {}
func (fixedResolver) Close()                                {}
