#!/usr/bin/env bash
# Container end-to-end check:
#   1. builds the static binary (CGO_ENABLED=0) and the FROM-scratch image
#      (deploy/Dockerfile; nothing is pulled), and the mutual-TLS material
#      with `logplayer certs` (a throwaway CA, a certificate per container
#      and one for the CLI; every connection runs mutual TLS);
#   2. brings up deploy/compose.yaml: 3 LogStore nodes, a LogPlayer group of
#      2 members (player-1 registers the targets) and 3 shards on a private
#      bridge network (published ports on 127.0.0.1 only);
#   3. waits for a Raft leader, appends and tails through the CLI, then runs
#      the demo workload (`logplayer demo`) for 10 s and checks its JSON line:
#      every shard caught up and its state equals the model built from the
#      log; then the group (`logplayer players`) must show 2 members
#      sharing the 3 targets, and the members' admin APIs every target
#      connected with lag 0 at exactly one member;
#   4. kills player-1 (docker kill: SIGKILL) and checks that player-2 takes
#      all 3 targets with new tokens, then runs the demo workload again for
#      5 s with the same check;
#   5. tears everything down (containers, network, volumes, image), always.
# The CLI runs inside the compose network with the same image
# (`docker-compose exec store1 /logplayer ...`).
#   scripts/docker-e2e.sh [path/to/static/logplayer]
set -euo pipefail
cd "$(dirname "$0")/.."

if docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
else
  echo "docker-e2e: neither 'docker compose' nor 'docker-compose' works" >&2
  exit 1
fi

work=$(mktemp -d)
project="lpe2e$$"
image="logplayer:e2e-$$"
dc() { LOGPLAYER_TLS_DIR="$work/tls" LOGPLAYER_IMAGE="$image" "${compose[@]}" -p "$project" -f deploy/compose.yaml "$@"; }
cleanup() {
  rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "--- docker-e2e failed (exit $rc); last logs:" >&2
    dc logs --no-color --tail 40 >&2 || true
  fi
  dc down -v --remove-orphans >/dev/null 2>&1 || true
  docker rmi -f "$image" >/dev/null 2>&1 || true
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
step() { printf -- '--- docker-e2e: %s\n' "$*"; }

step "binary and image"
if [ -n "${1:-}" ]; then
  cp "$1" "$work/logplayer"
else
  CGO_ENABLED=0 go build -trimpath -o "$work/logplayer" ./cmd/logplayer
fi
docker build -q -f deploy/Dockerfile -t "$image" "$work" >/dev/null
docker run --rm "$image" version
"$work/logplayer" certs --dir "$work/tls" --node n1=store1 --node n2=store2 --node n3=store3 \
  --node player-1=player-1 --node player-2=player-2 --node shard-0=shard0 --node shard-1=shard1 --node shard-2=shard2 --client cli >/dev/null
chmod a+r "$work/tls"/*.key # the container's user reads them through the bind mount

step "compose up"
dc up -d

stores=store1:7400,store2:7400,store3:7400
cli() { dc exec -T -e LOGPLAYER_TLS_CERT=/tls/cli.crt -e LOGPLAYER_TLS_KEY=/tls/cli.key store1 /logplayer "$@"; }

step "waiting for a Raft leader"
deadline=$((SECONDS + 120))
until cli status --addr "$stores" --timeout 3s --json 2>/dev/null | grep -Eq '"leader":"n[0-9]+"'; do
  if [ "$SECONDS" -ge "$deadline" ]; then echo "no leader within 120 s" >&2; exit 1; fi
  sleep 1
done
cli status --addr "$stores"

step "append and tail through the CLI"
out=$(cli append --addr "$stores" --topic orders='{"id":1,"item":"book"}' --put shard-1:user/1=alice)
echo "$out"
echo "$out" | grep -Eq '"lsn":[1-9]' || { echo "append printed no LSN" >&2; exit 1; }
cli tail --addr "$stores" --topic orders --limit 1 | tee "$work/tail.out"
grep -q '"item":"book"' "$work/tail.out" || { echo "tail did not show the order" >&2; exit 1; }

step "demo workload (10 s) and delivery check"
cli demo --addr "$stores" --duration 10s --catch-up 90s \
  --shard shard-0=shard0:7430 --shard shard-1=shard1:7430 --shard shard-2=shard2:7430 | tee "$work/demo.out"
scripts/check-demo-json.sh "$(tail -n 1 "$work/demo.out")"

# members_owning N M: the group has N members and M owns every target.
group_json() { cli players --addr "$stores" --group players --json; }
targets_of() { # targets_of MEMBER: how many targets MEMBER owns
  group_json | grep -o "\"target\":\"shard-[0-9]\",\"member\":\"$1\"" | wc -l
}

step "the group: 2 members share the 3 targets"
deadline=$((SECONDS + 60))
until [ "$(group_json | grep -o '"lease_left_seconds"' | wc -l)" -eq 2 ] &&
      [ "$(targets_of player-1)" -ge 1 ] && [ "$(targets_of player-2)" -ge 1 ] &&
      [ $(( $(targets_of player-1) + $(targets_of player-2) )) -eq 3 ]; do
  if [ "$SECONDS" -ge "$deadline" ]; then echo "group not balanced: $(group_json)" >&2; exit 1; fi
  sleep 1
done
cli players --addr "$stores"

step "the members' view: every target connected with lag 0 at one member"
deadline=$((SECONDS + 60))
until cli status --addr "$stores" --player player-1:7420 --json > "$work/status1.json" &&
      cli status --addr "$stores" --player player-2:7420 --json > "$work/status2.json" &&
      [ "$(cat "$work/status1.json" "$work/status2.json" | grep -o '"connected":true' | wc -l)" -eq 3 ] &&
      [ "$(cat "$work/status1.json" "$work/status2.json" | grep -o '"lag_entries":0,' | wc -l)" -eq 3 ]; do
  if [ "$SECONDS" -ge "$deadline" ]; then
    echo "targets not caught up: $(cat "$work/status1.json" "$work/status2.json")" >&2; exit 1
  fi
  sleep 1
done
cli status --addr "$stores" --player player-1:7420
cli status --addr "$stores" --player player-2:7420

step "failover: player-1 killed, player-2 takes every target"
killed_at=$SECONDS
docker kill "$(dc ps -q player-1)" >/dev/null
deadline=$((SECONDS + 60))
until [ "$(targets_of player-2)" -eq 3 ]; do
  if [ "$SECONDS" -ge "$deadline" ]; then echo "targets did not move to player-2: $(group_json)" >&2; exit 1; fi
  sleep 1
done
echo "every target owned by player-2 within $((SECONDS - killed_at)) s of the kill (lease 3 s; polled every second)"
cli players --addr "$stores"
cli demo --addr "$stores" --duration 5s --catch-up 90s \
  --shard shard-0=shard0:7430 --shard shard-1=shard1:7430 --shard shard-2=shard2:7430 | tee "$work/demo2.out"
scripts/check-demo-json.sh "$(tail -n 1 "$work/demo2.out")"

step "OK"
