// Command fakes3 is an S3-compatible server for tests only: gofakes3
// (github.com/johannesboyne/gofakes3) on a bbolt file, so a server killed
// and started again on the same file still has its objects. The e2e tests
// of tiered storage (e2e/tier_test.go) build and run it as its own process
// on loopback; it checks no signatures and must never face a network.
//
//	fakes3 --addr 127.0.0.1:9000 --db /tmp/s3.bolt
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9000", "loopback `address` to serve S3 on")
	db := flag.String("db", "fakes3.bolt", "bbolt `file` holding the buckets")
	flag.Parse()
	if err := run(*addr, *db); err != nil {
		fmt.Fprintln(os.Stderr, "fakes3:", err)
		os.Exit(1)
	}
}

func run(addr, db string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return errors.New("--addr must be a loopback address: this server is for tests")
	}
	backend, err := s3bolt.NewFile(db)
	if err != nil {
		return err
	}
	faker := gofakes3.New(backend, gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.StdLog(log.New(os.Stderr, "", log.LstdFlags), gofakes3.LogErr)))
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	log.Printf("fakes3 serving on %s (db %s)", lis.Addr(), db)
	srv := &http.Server{Handler: faker.Server(), ReadHeaderTimeout: 10 * time.Second}
	return srv.Serve(lis)
}
