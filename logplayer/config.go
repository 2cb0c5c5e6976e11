package logplayer

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/logplayer/logplayer/fetcher"
	"github.com/logplayer/logplayer/targetqueue"
	"github.com/logplayer/logplayer/types"
)

// ErrInvalidConfig is wrapped by every configuration error (Config, the
// targets file, an AddTarget request).
var ErrInvalidConfig = errors.New("logplayer: invalid config")

// Defaults of Config.
const (
	// DefaultMaxBatchCount bounds the deliveries of one Batch sent to a
	// target: a target group-commits what it received while it applied, so a
	// batch need not be large; 256 keeps one Send far below a millisecond.
	DefaultMaxBatchCount = 256
	// DefaultMaxBatchBytes bounds one Batch's payload (a target's default
	// gRPC receive limit is 4 MiB; one larger transaction still goes alone).
	DefaultMaxBatchBytes = 1 << 20
	// DefaultWindowBatches bounds the batches in flight (sent, not acked) to
	// one target: enough to keep a target's group commit fed (it queues up
	// to 64 batches) while bounding what a dead stream can strand.
	DefaultWindowBatches = 32
	// DefaultWindowBytes bounds the payload bytes in flight to one target.
	DefaultWindowBytes = 8 << 20
	// DefaultHandshakeTimeout is how long a LogPlayer start waits for the
	// configured targets to answer before starting the main stream without
	// the silent ones (they recover when they answer).
	DefaultHandshakeTimeout = 5 * time.Second
	// DefaultHelloTimeout bounds one Hello/HelloAck exchange.
	DefaultHelloTimeout = 5 * time.Second
	// DefaultProgressInterval is how often an idle target gets a progress
	// marker.
	DefaultProgressInterval = time.Second
	// DefaultReportInterval is how often targets' acked LSNs go to the
	// LogStore's retention floor.
	DefaultReportInterval = 5 * time.Second
	// DefaultRetryInitial and DefaultRetryMax bound a target's reconnect
	// backoff.
	DefaultRetryInitial = 50 * time.Millisecond
	DefaultRetryMax     = 5 * time.Second
	// DefaultPermanentRetry is the delay before trying again a target that
	// refused permanently (APPLY_REJECTED, wrong target, protocol version,
	// recovery below retention): only an operator can fix it.
	DefaultPermanentRetry = time.Minute
	// DefaultKeepaliveTime and DefaultKeepaliveTimeout detect a dead target
	// or LogStore connection. Servers must allow pings this often
	// (keepalive.EnforcementPolicy{MinTime <= 10s}, see ServerKeepalive).
	DefaultKeepaliveTime    = 10 * time.Second
	DefaultKeepaliveTimeout = 5 * time.Second
	// maxRecvMsgBytes is the largest LogStore Read response accepted: far
	// above a response's size bound, so a few very large transactions in one
	// response never wedge the main stream.
	maxRecvMsgBytes = 256 << 20
)

// TargetConfig names one delivery target.
type TargetConfig struct {
	// ID is the target's stable name (also its consumer name in the
	// LogStore: "logplayer/<id>").
	ID string `json:"id"`
	// Address is host:port of the target's gRPC Target service.
	Address string `json:"address"`
	// Topics the target subscribes to (at least one).
	Topics []string `json:"topics"`
	// Epoch, when not 0, is the Hello epoch of this target's streams
	// instead of the Player's: in a group, the target's fencing token
	// (GroupConfig). Never read from a targets file.
	Epoch types.Epoch `json:"-"`
}

// Config configures a Player.
type Config struct {
	// PlayerID names this LogPlayer process in Hellos and logs. Default:
	// hostname/pid.
	PlayerID string
	// LogStore lists host:port of the LogStore nodes (any order). Required
	// unless Fetcher is set.
	LogStore []string
	// Fetcher, when set, is used instead of dialling LogStore (tests).
	Fetcher *fetcher.Fetcher
	// Targets to deliver to from the start. More can be added at runtime.
	Targets []TargetConfig
	// Queue bounds each target's normal and catchup queues.
	Queue targetqueue.Config
	// MaxBatchCount and MaxBatchBytes bound one Batch sent to a target.
	MaxBatchCount int
	MaxBatchBytes int64
	// WindowBatches and WindowBytes bound what is in flight (sent, not
	// acked) to one target.
	WindowBatches int
	WindowBytes   int64
	// HandshakeTimeout is how long Run waits for the configured targets'
	// handshakes before starting the main stream.
	HandshakeTimeout time.Duration
	// HelloTimeout bounds one Hello/HelloAck exchange.
	HelloTimeout time.Duration
	// ProgressInterval is how often an idle target receives a progress
	// marker: how long nothing must have been pushed to a target for it to
	// count as idle (one that receives transactions needs no marker; its
	// applied LSN then trails the log by at most about an interval and a
	// quarter of time). The ticker looks four times per interval, so a
	// target that just became idle and behind (taken over after a
	// failover) waits at most a quarter interval. Negative disables
	// progress markers.
	ProgressInterval time.Duration
	// ReportInterval is how often acked LSNs are reported to the LogStore
	// (ReportConsumer). Negative disables reporting.
	ReportInterval time.Duration
	// RetryInitial and RetryMax bound reconnect backoff (targets and
	// LogStore).
	RetryInitial, RetryMax time.Duration
	// PermanentRetry is the delay after a permanent refusal.
	PermanentRetry time.Duration
	// Keepalive for target and LogStore connections. Zero Time takes the
	// defaults; negative Time disables keepalive pings.
	Keepalive keepalive.ClientParameters
	// DialOptions are added to every connection the Player dials.
	DialOptions []grpc.DialOption
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Registerer receives the logplayer_… metrics; default a private
	// registry (kept, not exported).
	Registerer prometheus.Registerer
	// Now is the clock for delay metrics and markers; default time.Now.
	Now func() time.Time
	// Group, when set, makes the Player a member of a LogPlayer group
	// (group.go): its targets are the group's assignments, not Targets
	// (which are registered in the LogStore's target registry at start).
	Group *GroupConfig
}

// Defaults of GroupConfig.
const (
	// DefaultLeaseMargin is the part of the lease a member gives up to
	// clock-rate drift: it stops delivering at send time + lease × (1 −
	// margin) of its own monotonic clock, while the LogStore ends the lease
	// at renewal log time + lease. 10% covers any sane drift (quartz drifts
	// by ppm) and small steps of the leaders' clocks (see ARCHITECTURE §4).
	DefaultLeaseMargin = 0.1
	// DefaultHeartbeatInterval is the heartbeat period until the first
	// answer gives the lease; then it is lease/3, so two heartbeats may be
	// lost before the lease lapses.
	DefaultHeartbeatInterval = time.Second
	// DefaultLeaveTimeout bounds LeaveGroup at shutdown.
	DefaultLeaveTimeout = 2 * time.Second
)

// GroupConfig configures group membership (issue 13): a member renews a
// lease through the LogStore and delivers to the targets the LogStore
// assigns it, each with its fencing token as the Hello epoch.
type GroupConfig struct {
	// Name of the group. Required.
	Name string
	// MemberID is this member's stable name; default Config.PlayerID.
	MemberID string
	// AdminAddress is shown by DescribeGroup (may be empty).
	AdminAddress string
	// Incarnation is unique per process start; default 16 random hex
	// digits.
	Incarnation string
	// HeartbeatInterval fixes the heartbeat period; 0: lease/3 (and
	// DefaultHeartbeatInterval before the first answer).
	HeartbeatInterval time.Duration
	// LeaseMargin is the fraction of the lease given up to clock drift
	// (0 < m < 0.5); 0 takes DefaultLeaseMargin.
	LeaseMargin float64
	// LeaveTimeout bounds LeaveGroup at shutdown; 0 takes
	// DefaultLeaveTimeout.
	LeaveTimeout time.Duration
	// Conns, when set, are the LogStore connections of the group calls
	// (tests); default: the connections New dials to Config.LogStore.
	Conns []grpc.ClientConnInterface

	// noLeaseCheck disables the local lease deadline (tests: a zombie that
	// keeps delivering, so that the targets' token fencing is what stops it).
	noLeaseCheck bool
}

func (g *GroupConfig) validate(playerID string) error {
	if !ValidTopic(g.Name) {
		return fmt.Errorf("%w: group name %q: want 1-%d characters from [A-Za-z0-9._-]", ErrInvalidConfig, g.Name, types.MaxTopicLen)
	}
	if g.MemberID == "" {
		g.MemberID = playerID
	}
	if g.Incarnation == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		g.Incarnation = hex.EncodeToString(b[:])
	}
	if g.HeartbeatInterval < 0 {
		return fmt.Errorf("%w: group heartbeat interval %v < 0", ErrInvalidConfig, g.HeartbeatInterval)
	}
	if g.LeaseMargin == 0 {
		g.LeaseMargin = DefaultLeaseMargin
	}
	if g.LeaseMargin <= 0 || g.LeaseMargin >= 0.5 {
		return fmt.Errorf("%w: lease margin %v: want 0 < margin < 0.5", ErrInvalidConfig, g.LeaseMargin)
	}
	if g.LeaveTimeout == 0 {
		g.LeaveTimeout = DefaultLeaveTimeout
	}
	return nil
}

func (c *Config) validate() error {
	if c.Fetcher == nil && len(c.LogStore) == 0 {
		return fmt.Errorf("%w: no LogStore addresses", ErrInvalidConfig)
	}
	for _, a := range c.LogStore {
		if err := validAddress(a); err != nil {
			return fmt.Errorf("%w: LogStore address: %v", ErrInvalidConfig, err)
		}
	}
	if err := ValidateTargets(c.Targets); err != nil {
		return err
	}
	if err := c.Queue.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if c.PlayerID == "" {
		host, _ := os.Hostname()
		c.PlayerID = host + "/" + strconv.Itoa(os.Getpid())
	}
	if err := orDefault(
		bound[int]{"MaxBatchCount", &c.MaxBatchCount, DefaultMaxBatchCount},
		bound[int]{"WindowBatches", &c.WindowBatches, DefaultWindowBatches},
	); err != nil {
		return err
	}
	if err := orDefault(
		bound[int64]{"MaxBatchBytes", &c.MaxBatchBytes, DefaultMaxBatchBytes},
		bound[int64]{"WindowBytes", &c.WindowBytes, DefaultWindowBytes},
	); err != nil {
		return err
	}
	if err := orDefault(
		bound[time.Duration]{"HandshakeTimeout", &c.HandshakeTimeout, DefaultHandshakeTimeout},
		bound[time.Duration]{"HelloTimeout", &c.HelloTimeout, DefaultHelloTimeout},
		bound[time.Duration]{"RetryInitial", &c.RetryInitial, DefaultRetryInitial},
		bound[time.Duration]{"RetryMax", &c.RetryMax, DefaultRetryMax},
		bound[time.Duration]{"PermanentRetry", &c.PermanentRetry, DefaultPermanentRetry},
	); err != nil {
		return err
	}
	if c.RetryMax < c.RetryInitial {
		return fmt.Errorf("%w: RetryMax %v below RetryInitial %v", ErrInvalidConfig, c.RetryMax, c.RetryInitial)
	}
	if c.ProgressInterval == 0 {
		c.ProgressInterval = DefaultProgressInterval
	}
	if c.ReportInterval == 0 {
		c.ReportInterval = DefaultReportInterval
	}
	if c.Keepalive.Time == 0 {
		c.Keepalive = keepalive.ClientParameters{Time: DefaultKeepaliveTime, Timeout: DefaultKeepaliveTimeout}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Group != nil {
		if err := c.Group.validate(c.PlayerID); err != nil {
			return err
		}
		if len(c.Group.Conns) == 0 && len(c.LogStore) == 0 {
			return fmt.Errorf("%w: a group member needs LogStore addresses (or GroupConfig.Conns)", ErrInvalidConfig)
		}
	}
	return nil
}

// bound is a Config field that may not be negative, with its default for 0.
type bound[T int | int64 | time.Duration] struct {
	name string
	v    *T
	def  T
}

// orDefault rejects the first negative bound and sets each zero one to its
// default.
func orDefault[T int | int64 | time.Duration](bs ...bound[T]) error {
	for _, b := range bs {
		if *b.v < 0 {
			return fmt.Errorf("%w: %s %v < 0", ErrInvalidConfig, b.name, *b.v)
		}
		*b.v = cmp.Or(*b.v, b.def)
	}
	return nil
}

// ServerKeepalive is the keepalive enforcement policy a target or LogStore
// gRPC server needs so the LogPlayer's pings (DefaultKeepaliveTime) are not
// answered with GOAWAY too_many_pings:
//
//	grpc.NewServer(grpc.KeepaliveEnforcementPolicy(logplayer.ServerKeepalive))
var ServerKeepalive = keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}

// ValidTopic reports whether name is a valid topic (types.ValidTopic: 1 to
// 249 characters from [A-Za-z0-9._-]).
func ValidTopic(name string) bool { return types.ValidTopic(name) }

func validAddress(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q: %v", a, err)
	}
	if host == "" {
		return fmt.Errorf("%q: empty host", a)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: bad port", a)
	}
	return nil
}

// Validate checks one target: a non-empty id of valid topic characters, a
// host:port address, and at least one valid topic, none repeated.
func (tc TargetConfig) Validate() error {
	if !ValidTopic(tc.ID) {
		return fmt.Errorf("%w: target id %q: want 1-%d characters from [A-Za-z0-9._-]", ErrInvalidConfig, tc.ID, types.MaxTopicLen)
	}
	if err := validAddress(tc.Address); err != nil {
		return fmt.Errorf("%w: target %s: address %v", ErrInvalidConfig, tc.ID, err)
	}
	if len(tc.Topics) == 0 {
		return fmt.Errorf("%w: target %s: no topics", ErrInvalidConfig, tc.ID)
	}
	seen := map[string]bool{}
	for _, t := range tc.Topics {
		if !ValidTopic(t) {
			return fmt.Errorf("%w: target %s: invalid topic %q", ErrInvalidConfig, tc.ID, t)
		}
		if seen[t] {
			return fmt.Errorf("%w: target %s: topic %q listed twice", ErrInvalidConfig, tc.ID, t)
		}
		seen[t] = true
	}
	return nil
}

// ParseTargetSpec reads ID=ADDR/TOPIC[,TOPIC...] (`logplayer player
// --target`); it checks only the form, ValidateTargets the rest.
func ParseTargetSpec(s string) (TargetConfig, error) {
	id, rest, ok := strings.Cut(s, "=")
	addr, topics, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return TargetConfig{}, fmt.Errorf("want ID=ADDR/TOPIC[,TOPIC...], e.g. shard-0=127.0.0.1:7430/shard-0")
	}
	return TargetConfig{ID: id, Address: addr, Topics: strings.Split(topics, ",")}, nil
}

// ValidateTargets checks every target and that ids are unique.
func ValidateTargets(ts []TargetConfig) error {
	ids := map[string]bool{}
	for _, tc := range ts {
		if err := tc.Validate(); err != nil {
			return err
		}
		if ids[tc.ID] {
			return fmt.Errorf("%w: target id %q used twice", ErrInvalidConfig, tc.ID)
		}
		ids[tc.ID] = true
	}
	return nil
}

// TargetsFile is the JSON targets file:
//
//	{
//	  "targets": [
//	    {"id": "shard-0", "address": "127.0.0.1:7600", "topics": ["shard-0"]},
//	    {"id": "search",  "address": "10.0.0.7:7600",  "topics": ["orders", "users"]}
//	  ]
//	}
//
// Unknown keys are an error (a typo must not silently drop a setting).
type TargetsFile struct {
	Targets []TargetConfig `json:"targets"`
}

// ParseTargets decodes and validates a targets file.
func ParseTargets(data []byte) ([]TargetConfig, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f TargetsFile
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: targets file: %v", ErrInvalidConfig, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: targets file: data after the JSON object", ErrInvalidConfig)
	}
	if err := ValidateTargets(f.Targets); err != nil {
		return nil, err
	}
	return f.Targets, nil
}

// LoadTargets reads and validates the targets file at path.
func LoadTargets(path string) ([]TargetConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return ParseTargets(data)
}
