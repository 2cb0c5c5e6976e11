# rename.sed: the renames of wip/cli (issue #27 items 1 and 7: the CLI
# framework moved from cmd/logplayer to internal/cli, the help prose to
# cmd/logplayer/help/<command with dashes>.txt).
#
# Apply to the command files of cmd/logplayer (and their tests):
#   sed -i -f rename.sed cmd/logplayer/<file>.go
# then, in every file that now says "cli.":
#   - add the import "github.com/logplayer/logplayer/internal/cli";
#   - run gofmt -w (the register blocks and struct fields lose their
#     alignment when the help fields go).
# A file may still need "flag" or lose "fmt"; go vet names it.
# Caution: a local variable named cli (devhttp_test.go has one) shadows the
# package; such a file needs no import unless it uses the package too.
# The register-block rules delete the prose fields (summary, synopsis,
# about, examples, const sinkAbout): if another branch changed that prose,
# carry the change into cmd/logplayer/help/<command with dashes>.txt and
# rewrite cmd/logplayer/testdata/help.golden with
#   go test ./cmd/logplayer -run TestHelpGolden -update-help
# A new command needs its help file (app.Register panics without one) and
# its name in app.Order (cmd/logplayer/app.go).
# Checked: this script, then adding the import and gofmt, turns main's
# command files into wip/cli's, but for the hand-edited main.go,
# cli_test.go and readme_test.go.
# Every rule is idempotent: applying the script twice changes nothing more.
#
# Test files use a few framework names sed cannot rename safely (the
# command table `commands` -> app.Commands(), c.name -> c.Name,
# c.server -> c.Server, c.new().flags(fs) -> c.New().Flags(fs)); those were
# edited by hand on wip/cli (cli_test.go, readme_test.go, help_test.go).

# --- register blocks: the prose is in help/<name>.txt now ------------------
/^const sinkAbout = `/,/`$/d
/register(&command{/,/^\t})$/{
	/^\t\tabout: *`/,/`,$/d
	/^\t\tabout: /d
	/^\t\tsummary: /d
	/^\t\tsynopsis: /d
	/^\t\texamples: \[\]string{$/,/^\t\t},$/d
	/^\t\texamples: /d
	s/^\t\tname:/\t\tName:/
	s/^\t\tserver:/\t\tServer:/
	s/^\t\tquietLogs:/\t\tQuietLogs:/
	s/^\t\trequired:/\t\tRequired:/
	s/^\t\tnew:/\t\tNew:/
	s/func() runner {/func() cli.Runner {/
	s/\bregister(&command{/app.Register(\&cli.Command{/
}

# --- the Runner methods and the flag.Value markers -------------------------
s/^\(func ([^)]*)\) flags(\([a-z_]* \)\?\*flag\.FlagSet) {/\1 Flags(\2*flag.FlagSet) {/
s/^\(func ([^)]*)\) run(\([a-z_]*\) context\.Context, s \*sys) error {/\1 Run(\2 context.Context, s *cli.Sys) error {/
s/^\(func (\*[A-Za-z0-9_]*)\) repeatable() *{}/\1 Repeatable() {}/
s/^\(func (\*[A-Za-z0-9_]*)\) noEnv() *{}/\1 NoEnv() {}/

# --- Sys ---------------------------------------------------------------------
s/\*sys\b/*cli.Sys/g
s/&sys{/\&cli.Sys{/g
/cli\.Sys{/{
	s/\bstdin:/Stdin:/g
	s/\bstdout:/Stdout:/g
	s/\bstderr:/Stderr:/g
	s/\blog:/Log:/g
}
s/\bs\.stdin\b/s.Stdin/g
s/\bs\.stdout\b/s.Stdout/g
s/\bs\.stderr\b/s.Stderr/g
s/\bs\.log\b/s.Log/g

# --- framework functions and constants ---------------------------------------
s/\busagef(/cli.Usagef(/g
s/\busageError\b/cli.UsageError/g
s/\bexitOK\b/cli.ExitOK/g
s/\bexitRuntime\b/cli.ExitRuntime/g
s/\bexitUsage\b/cli.ExitUsage/g
s/\bcheckAddr(/cli.CheckAddr(/g
s/\berrRaftPeers\b/cli.ErrRaftPeers/g
s/\benvName(/app.EnvName(/g
s/\benvPrefix\b/app.EnvPrefix/g
s/\blookup(\("[^"]*"\))\.parse(/app.Parse(\1, /g
s/\([^.A-Za-z_]\)run(\(ctx\|context\.Background()\), /\1app.Run(\2, /g

# --- flag value types and their fields -----------------------------------------
s/\baddrValue\b/cli.AddrValue/g
s/\boptAddrValue\b/cli.OptAddrValue/g
s/\bsizeValue\b/cli.SizeValue/g
s/\bstringList\b/cli.StringList/g
s/\baddrList\b/cli.AddrList/g
s/\bpeerList\b/cli.PeerList/g
s/\bintList\b/cli.IntList/g
s/\bchoiceValue\b/cli.ChoiceValue/g
s/cli\.IntList{ints:/cli.IntList{Ints:/g
s/cli\.ChoiceValue{value: \(.*\), choices: /cli.ChoiceValue{Value: \1, Choices: /g
s/\.\(mode\|onBad\)\.value\b/.\1.Value/g
s/\.addr\.addr\b/.addr.Addr/g
s/\([A-Za-z]Addr\)\.addr\b/\1.Addr/g
s/\.player\.addr\b/.player.Addr/g
s/\([A-Za-z]\)\.bytes\b/\1.Bytes/g
s/\.ints\b/.Ints/g
s/\.peers\.peers\b/.peers.Peers/g
s/\.Peers\[\([0-9]*\)\]\.id\b/.Peers[\1].ID/g
s/\bp\.id, RaftAddr: p\.raftAddr, APIAddr: p\.apiAddr\b/p.ID, RaftAddr: p.RaftAddr, APIAddr: p.APIAddr/g
s/peers = append(peers, p\.id)/peers = append(peers, p.ID)/g
s/\.\(topics\|filter\|store\)\.items\b/.\1.Items/g

# --- TLS and authorization flags (internal/cli/tlsflags.go) --------------------
s/(tlsServerFlags\.setup)/(internal\/cli\/tlsflags.go:TLSServerFlags.Setup)/g
s/\btlsServerFlags\b/cli.TLSServerFlags/g
s/\btlsClientFlags\b/cli.TLSClientFlags/g
s/\braftTLSFlags\b/cli.RaftTLSFlags/g
s/\.tls\.register(fs)/.tls.Register(fs)/g
s/\.raftTLS\.register(fs)/.raftTLS.Register(fs)/g
s/\.dial\.register(fs, false)/.dial.Register(fs, false)/g
s/\.tls\.setup(/.tls.Setup(/g
s/\.tls\.enabled()/.tls.Enabled()/g
s/\.tls\.serverTLSOptions()/.tls.ServerTLSOptions()/g
s/\.\(tls\|raftTLS\)\.cert\b/.\1.Cert/g
s/\.\(tls\|raftTLS\)\.key\b/.\1.Key/g
s/\.\(tls\|raftTLS\)\.ca\b/.\1.CA/g
s/\.raftTLS\.peers\.items\b/.raftTLS.Peers.Items/g
s/\.raftTLS\.peers\.set\b/.raftTLS.Peers.Given/g
s/\bd\.ca, d\.cert, d\.key = /d.CA, d.Cert, d.Key = /g
s/\bd\.dialOptions()/d.DialOptions()/g

# --- client connection flags (internal/cli/connect.go) ---------------------------
s/\bclientFlags\b/cli.ClientFlags/g
/^\/\/ once dials the cluster, runs fn within the timeout and describes its$/,/^}$/d
s/\.conn\.register(fs)/.conn.Register(fs)/g
s/\.conn\.dial(/.conn.Dial(/g
s/\.conn\.dialOther\b/.conn.DialOther/g
s/\.conn\.describe(/.conn.Describe(/g
s/\.conn\.leaderStatus(/.conn.LeaderStatus(/g
s/\.conn\.unreachable(/.conn.Unreachable(/g
s/\.conn\.once(/.conn.Once(/g
s/\.conn\.timeout\b/.conn.Timeout/g
s/\.conn\.addrs\b/.conn.Addrs/g
s/\.conn\.tls\.mistake(/.conn.TLS.Mistake(/g
s/\.Addrs\.items\b/.Addrs.Items/g
