package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/logplayer/logplayer/internal/cli"
	"github.com/logplayer/logplayer/security"
)

type certsCmd struct {
	opts security.BundleOptions
}

func (c *certsCmd) Flags(fs *flag.FlagSet) {
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

func (c *certsCmd) Run(_ context.Context, s *cli.Sys) error {
	if c.opts.Validity <= 0 || c.opts.CAValidity <= 0 {
		return cli.Usagef("--validity and --ca-validity must be positive")
	}
	files, err := security.WriteBundle(c.opts)
	if err != nil {
		return err
	}
	for _, f := range files {
		fmt.Fprintln(s.Stdout, f)
	}
	if len(c.opts.Nodes) > 0 || len(c.opts.Clients) > 0 {
		fmt.Fprintf(s.Stdout, "certificates valid until %s\n", time.Now().Add(c.opts.Validity).UTC().Format(time.RFC3339))
	}
	return nil
}
