package security

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
)

// Role is a set of RPCs a grant allows (see the method table, methods.go).
type Role string

const (
	// RoleProducer appends to topics matching the grant's patterns.
	RoleProducer Role = "producer"
	// RoleConsumer reads topics matching Topics, and commits and fetches
	// the offsets of consumer groups matching Groups.
	RoleConsumer Role = "consumer"
	// RolePlayer is a LogPlayer: NextEpoch, Read of every topic,
	// ReportConsumer, target registry, and the only role a target accepts
	// a Deliver stream from.
	RolePlayer Role = "player"
	// RoleAdmin changes the cluster: membership, leadership transfer,
	// DeleteGroup, delivery targets, topic declarations.
	RoleAdmin Role = "admin"
)

// Roles lists every role, in the policy file's vocabulary.
var Roles = []Role{RoleProducer, RoleConsumer, RolePlayer, RoleAdmin}

// AnyIdentity in a grant's identity field matches every authenticated
// caller (for example read access to public topics).
const AnyIdentity = "*"

// Grant gives one identity one role, limited by patterns for the producer
// and consumer roles. Topic and group patterns are path.Match globs
// ("orders", "shard-*", "*"); topic names never contain '/'.
//
// Producers binds producer names (InitProducer's name, an Append's legacy
// producer_id, and through the producer table the registered id an Append
// carries) to the identity: each entry is a name, or a prefix ending in
// '*' ("billing-*"; "*" alone is every name). Producer and consumer grants
// take it. A producer or consumer grant without it may use every name that
// no grant of the policy binds (producerNames): old policies keep working,
// and binding a name to its team protects it from every other identity.
type Grant struct {
	Identity  string   `json:"identity"`
	Role      Role     `json:"role"`
	Topics    []string `json:"topics,omitempty"`
	Groups    []string `json:"groups,omitempty"`
	Producers []string `json:"producers,omitempty"`
}

// Policy maps identities to roles; the policy file is its JSON encoding:
//
//	{"grants": [
//	  {"identity": "producer-1", "role": "producer", "topics": ["orders", "shard-*"], "producers": ["checkout-*"]},
//	  {"identity": "billing", "role": "consumer", "topics": ["orders"], "groups": ["billing"], "producers": ["billing"]},
//	  {"identity": "player", "role": "player"},
//	  {"identity": "ops", "role": "admin"}
//	]}
//
// An identity may have several grants; what they allow adds up. An
// identity with no grant is authenticated but may call only the methods
// every identity may call (Status, health, reflection).
type Policy struct {
	Grants []Grant `json:"grants"`
}

// ParsePolicy decodes and checks a policy file's content: unknown fields,
// unknown roles, bad patterns, and patterns on roles that take none are
// refused, so a typo never silently grants or withholds.
func ParsePolicy(data []byte) (*Policy, error) {
	var p Policy
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks every grant (ParsePolicy calls it).
func (p *Policy) Validate() error {
	for i, g := range p.Grants {
		where := fmt.Sprintf("policy: grant %d (%q)", i, g.Identity)
		if g.Identity == "" {
			return fmt.Errorf("%s: no identity", where)
		}
		if !slices.Contains(Roles, g.Role) {
			return fmt.Errorf("%s: unknown role %q (want one of %v)", where, g.Role, Roles)
		}
		for _, pat := range append(slices.Clone(g.Topics), g.Groups...) {
			if _, err := path.Match(pat, ""); err != nil || pat == "" {
				return fmt.Errorf("%s: bad pattern %q", where, pat)
			}
		}
		for _, pat := range g.Producers {
			if !validNamePattern(pat) {
				return fmt.Errorf("%s: bad producer name %q (a name, or a prefix ending in '*')", where, pat)
			}
		}
		if len(g.Producers) > 0 && g.Role != RoleProducer && g.Role != RoleConsumer {
			return fmt.Errorf("%s: role %s takes no producer names", where, g.Role)
		}
		switch g.Role {
		case RoleProducer:
			if len(g.Topics) == 0 || len(g.Groups) > 0 {
				return fmt.Errorf("%s: a producer grant needs topics and takes no groups", where)
			}
		case RoleConsumer:
			if len(g.Topics) == 0 && len(g.Groups) == 0 {
				return fmt.Errorf("%s: a consumer grant needs topics or groups", where)
			}
		default:
			if len(g.Topics) > 0 || len(g.Groups) > 0 {
				return fmt.Errorf("%s: role %s takes no topics or groups", where, g.Role)
			}
		}
	}
	return nil
}

// Warnings are what a valid policy does that its author may not expect:
// producer grants that bind no producer names. LoadPolicyFile logs them at
// every load.
func (p *Policy) Warnings() []string {
	var out []string
	for i, g := range p.Grants {
		if g.Role == RoleProducer && len(g.Producers) == 0 {
			out = append(out, fmt.Sprintf(`policy: grant %d (%q, producer) binds no producer names: it may register every name no grant binds; add "producers" to bind names to it`, i, g.Identity))
		}
	}
	return out
}

// grantSet is what one identity may do: the union of its grants.
type grantSet struct {
	produce, read, groups []string // patterns
	player, admin         bool
	names                 producerNames
}

// producerNames is which producer names an identity may use: the names
// its grants bind, and, when one of its producer or consumer grants binds
// none, every name no grant of the policy binds (claimed).
type producerNames struct {
	own     []string // name patterns of its grants
	unbound bool     // a producer or consumer grant without names
	claimed []string // name patterns of every grant of the policy
}

func (n *producerNames) allows(name string) bool {
	return matchName(n.own, name) || (n.unbound && !matchName(n.claimed, name))
}

// every reports whether allows is true for every name.
func (n *producerNames) every() bool {
	return slices.Contains(n.own, "*") || (n.unbound && len(n.claimed) == 0)
}

// validNamePattern: a non-empty name, or a prefix followed by one '*'.
func validNamePattern(pat string) bool {
	return pat != "" && !strings.Contains(strings.TrimSuffix(pat, "*"), "*")
}

func matchName(patterns []string, name string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(name, prefix) || p == name {
			return true
		}
	}
	return false
}

func (p *Policy) grantsFor(name string) *grantSet {
	gs := &grantSet{}
	for _, g := range p.Grants {
		gs.names.claimed = append(gs.names.claimed, g.Producers...)
		if g.Identity != name && g.Identity != AnyIdentity {
			continue
		}
		if g.Role == RoleProducer || g.Role == RoleConsumer {
			gs.names.own = append(gs.names.own, g.Producers...)
			gs.names.unbound = gs.names.unbound || len(g.Producers) == 0
		}
		switch g.Role {
		case RoleProducer:
			gs.produce = append(gs.produce, g.Topics...)
		case RoleConsumer:
			gs.read = append(gs.read, g.Topics...)
			gs.groups = append(gs.groups, g.Groups...)
		case RolePlayer:
			gs.player = true
		case RoleAdmin:
			gs.admin = true
		}
	}
	return gs
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

func (g *grantSet) has(r Role) bool {
	switch r {
	case RoleProducer:
		return len(g.produce) > 0
	case RoleConsumer:
		return len(g.read) > 0 || len(g.groups) > 0
	case RolePlayer:
		return g.player
	case RoleAdmin:
		return g.admin
	}
	return false
}

func (g *grantSet) canProduce(topic string) bool { return matchAny(g.produce, topic) }
func (g *grantSet) canRead(topic string) bool    { return g.player || matchAny(g.read, topic) }
func (g *grantSet) canGroup(group string) bool   { return matchAny(g.groups, group) }
func (g *grantSet) readsAll() bool               { return g.player || slices.Contains(g.read, "*") }

// PolicyFile is a policy file re-read when it changes.
type PolicyFile struct {
	w *watched[*Policy]
}

// LoadPolicyFile reads path once (failing on any error) and re-reads it
// when it changes; a bad edit keeps the previous policy and is logged, and
// so are a loaded policy's Warnings.
func LoadPolicyFile(path string, opts ReloadOptions) (*PolicyFile, error) {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	w, err := watchFile("policy", path, func(data []byte) (*Policy, error) {
		p, err := ParsePolicy(data)
		if err == nil {
			for _, w := range p.Warnings() {
				log.Warn(w, "file", path)
			}
		}
		return p, err
	}, opts)
	if err != nil {
		return nil, err
	}
	return &PolicyFile{w: w}, nil
}

// Policy returns the current policy.
func (f *PolicyFile) Policy() *Policy { return f.w.get() }
