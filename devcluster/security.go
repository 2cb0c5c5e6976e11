package devcluster

import (
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/logplayer/logplayer/demo"
	"github.com/logplayer/logplayer/security"
)

// The dev cluster's throwaway security material (Config.Secure), in
// Dir/TLSDir: a CA, a node certificate per server, client certificates of
// the fixed identities below, the CLIToken and the policy granting them.
const (
	TLSDir     = "tls"
	PolicyFile = "policy.json"
	// Identities with a client certificate (TLSDir/NAME.crt, NAME.key):
	// PlayerIdentity is the LogPlayer's node certificate.
	PlayerIdentity   = "player"
	AdminIdentity    = "admin"
	ProducerIdentity = "producer" // producer of every topic
	ConsumerIdentity = "consumer" // consumer of ConsumerTopics and groups "g-*"
	NobodyIdentity   = "nobody"   // authenticated, no grant
	// CLIToken is the bearer token (TLSDir/cli.token) of identity "cli":
	// producer, consumer of every topic and group, and admin. The dev
	// cluster's own client and the printed commands use it.
	CLIToken = "cli"
)

// ConsumerTopics are what ConsumerIdentity may read.
var ConsumerTopics = []string{demo.OrdersTopic, "shard-0"}

// devPolicy grants the identities above their roles. Every identity that
// may produce may use every producer name ("producers": ["*"]): the dev
// cluster has one user; a real policy binds each team to its own names
// (docs/SECURITY.md §5).
func devPolicy() string {
	return fmt.Sprintf(`{"grants": [
  {"identity": %q, "role": "player"},
  {"identity": %q, "role": "admin"},
  {"identity": %q, "role": "producer", "topics": ["*"], "producers": ["*"]},
  {"identity": %q, "role": "consumer", "topics": [%q, %q], "groups": ["g-*"], "producers": ["*"]},
  {"identity": %q, "role": "producer", "topics": ["*"], "producers": ["*"]},
  {"identity": %q, "role": "consumer", "topics": ["*"], "groups": ["*"]},
  {"identity": %q, "role": "admin"}
]}
`, PlayerIdentity, AdminIdentity, ProducerIdentity, ConsumerIdentity, ConsumerTopics[0], ConsumerTopics[1],
		CLIToken, CLIToken, CLIToken)
}

// writeSecurity writes the material into dir unless its policy file is
// there already (a restarted dev cluster keeps its CA and tokens).
func writeSecurity(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, PolicyFile)); err == nil {
		return nil
	}
	nodes := []security.NodeSpec{{Name: PlayerIdentity}, {Name: EventsTarget}}
	for i := range Stores {
		nodes = append(nodes, security.NodeSpec{Name: NodeID(i)})
	}
	for i := range Shards {
		nodes = append(nodes, security.NodeSpec{Name: demo.ShardTopic(i)})
	}
	if _, err := security.WriteBundle(security.BundleOptions{
		Dir: dir, Nodes: nodes, Tokens: []string{CLIToken},
		Clients: []string{AdminIdentity, ProducerIdentity, ConsumerIdentity, NobodyIdentity},
	}); err != nil {
		return fmt.Errorf("dev tls material: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, PolicyFile), []byte(devPolicy()), 0o600)
}

// TLSFiles are the CA, certificate and key files of identity name, a node
// or a client (Secure only).
func (c *Cluster) TLSFiles(name string) security.Files {
	return security.Files{
		CAFile:   filepath.Join(c.TLSDir, security.CACertFile),
		CertFile: filepath.Join(c.TLSDir, name+".crt"),
		KeyFile:  filepath.Join(c.TLSDir, name+".key"),
	}
}

// TokenFile is the CLI token's file (Secure only).
func (c *Cluster) TokenFile() string { return filepath.Join(c.TLSDir, CLIToken+".token") }

// DialOptions connect to any server of the cluster as identity name (its
// client certificate), or with the CLI token when name is CLIToken:
// plaintext when the cluster is not Secure.
func (c *Cluster) DialOptions(name string) ([]grpc.DialOption, error) {
	if c.TLSDir == "" {
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	if name == CLIToken {
		return security.GRPCDialOptions(security.ClientSettings{
			TLS:       security.ClientOptions{Files: security.Files{CAFile: c.TLSFiles(name).CAFile}, Reload: security.ReloadOptions{Log: c.log}},
			TokenFile: c.TokenFile(),
		})
	}
	return security.GRPCDialOptions(security.ClientSettings{
		TLS: security.ClientOptions{Files: c.TLSFiles(name), Reload: security.ReloadOptions{Log: c.log}},
	})
}

// serverOptions are the security of node name's gRPC server: TLS (client
// certificates verified when sent) and the dev policy and tokens; nil
// when the cluster is not Secure. shardTopics are a shard's topics.
func (c *Cluster) serverOptions(name string, shardTopics []string) ([]grpc.ServerOption, error) {
	if c.TLSDir == "" {
		return nil, nil
	}
	return security.GRPCServerOptions(security.ServerSettings{
		TLS:         *c.serverTLS(name),
		PolicyFile:  filepath.Join(c.TLSDir, PolicyFile),
		TokensFile:  filepath.Join(c.TLSDir, security.TokensFile),
		ShardTopics: shardTopics,
		Log:         c.log,
	})
}

// serverTLS is the TLS of node name's servers (client certificates
// verified when sent); nil when the cluster is not Secure.
func (c *Cluster) serverTLS(name string) *security.ServerOptions {
	if c.TLSDir == "" {
		return nil
	}
	return &security.ServerOptions{
		Files: c.TLSFiles(name), ClientAuth: security.ClientAuthRequest,
		Reload: security.ReloadOptions{Log: c.log},
	}
}

// raftPeers: the Raft peers are the LogStore nodes' certificates.
func raftPeers() []string {
	var out []string
	for i := range Stores {
		out = append(out, NodeID(i))
	}
	return out
}
