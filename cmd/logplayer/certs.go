package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/logplayer/logplayer/security"
)

func init() {
	register(&command{
		name:     "certs",
		summary:  "create a CA, node and client certificates, and bearer tokens",
		synopsis: "--dir DIR [--node NAME[=HOST,...]]... [--client NAME]... [--token NAME]...",
		about: `
Writes into --dir a CA (ca.crt, ca.key; reused when both exist), a server and
client certificate per --node (NAME.crt, NAME.key: valid for localhost,
127.0.0.1, ::1 and the given hosts), a client certificate per --client named
after the identity it carries (producer-1, player, admin, ...), and a bearer
token per --token (NAME.token for the client, its SHA-256 appended to
tokens.jsonl for the servers). ECDSA P-256, Go's crypto/x509: no openssl.
Existing files of the same names are replaced; running nodes reload them.
Keep ca.key offline: whoever has it can mint any identity. See
docs/SECURITY.md for the policy file that gives identities their roles.`,
		examples: []string{
			"logplayer certs --dir tls --node n1=db1.example --node n2=db2.example --node n3=db3.example --client player --client admin",
			"logplayer certs --dir tls --client producer-1 --token billing",
		},
		required: []string{"dir"},
		new:      func() runner { return &certsCmd{} },
	})
}

type certsCmd struct {
	opts security.BundleOptions
}

func (c *certsCmd) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.opts.Dir, "dir", "", "the `directory` to write into (created, mode 0700)")
	fs.Func("node", "a node certificate: `NAME[=HOST,...]` (repeatable)", func(s string) error {
		c.opts.Nodes = append(c.opts.Nodes, security.ParseNodeSpec(s))
		return nil
	})
	fs.Func("client", "a client certificate for identity `NAME` (repeatable)", func(s string) error {
		c.opts.Clients = append(c.opts.Clients, s)
		return nil
	})
	fs.Func("token", "a bearer token for identity `NAME` (repeatable)", func(s string) error {
		c.opts.Tokens = append(c.opts.Tokens, s)
		return nil
	})
	fs.DurationVar(&c.opts.Validity, "validity", security.DefaultCertValidity, "how long node and client certificates are valid")
	fs.DurationVar(&c.opts.CAValidity, "ca-validity", security.DefaultCAValidity, "how long a new CA is valid")
}

func (c *certsCmd) run(_ context.Context, s *sys) error {
	if c.opts.Validity <= 0 || c.opts.CAValidity <= 0 {
		return usagef("--validity and --ca-validity must be positive")
	}
	files, err := security.WriteBundle(c.opts)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(s.stdout, f)
	}
	if len(c.opts.Nodes) > 0 || len(c.opts.Clients) > 0 {
		fmt.Fprintf(s.stdout, "certificates valid until %s\n", time.Now().Add(c.opts.Validity).UTC().Format(time.RFC3339))
	}
	return nil
}
