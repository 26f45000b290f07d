#!/usr/bin/env bash
# The whole test suite, on a fresh clone: installs what it needs, then runs formatting,
# vet, the linter, the Go tests under the race detector, the churn test at full rate, the
# JavaScript recovery helper's own tests (clients/js), and the real-client suite (pusher-js and the pusher server SDK from npm against a herald it builds
# and starts).
#
# The first step that fails stops the script with its exit status (set -e). Whether it passes
# or fails, the script ends with a summary: every step that ran, pass or FAIL, and how long it
# took. A step is one line below: `run "name" command args...` (a shell function for more).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
start=$SECONDS

results=()   # "pass|FAIL <seconds> <name>", in the order the steps ran
current=''   # the step running now, if any
step_start=0

# run NAME COMMAND...: runs one step; a failure ends the script (set -e) and the summary names it.
run() {
  current=$1
  shift
  step_start=$SECONDS
  printf '\n== %s (%ds)\n' "$current" $((SECONDS - start))
  "$@"
  results+=("pass $((SECONDS - step_start)) $current")
  current=''
}

summary() {
  local status=$1
  if [ -n "$current" ]; then
    results+=("FAIL $((SECONDS - step_start)) $current")
  fi
  printf '\n== summary (%ds)\n' $((SECONDS - start))
  local r word secs
  for r in "${results[@]}"; do
    word=${r%% *}
    r=${r#* }
    secs=${r%% *}
    printf '  %-4s %5ds  %s\n' "$word" "$secs" "${r#* }"
  done
  if [ "$status" -eq 0 ]; then
    printf 'all %d steps passed\n' "${#results[@]}"
  elif [ -n "$current" ]; then
    printf 'FAILED: %s (exit status %d); the steps after it did not run\n' "$current" "$status"
  else
    printf 'FAILED outside any step (exit status %d)\n' "$status"
  fi
}
trap 'summary $?' EXIT

tools() {
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    apt-get update -qq && apt-get install -y -qq nodejs npm
  fi
  local node_major
  node_major=$(node -p 'process.versions.node.split(".")[0]')
  if [ "$node_major" -lt 20 ]; then
    echo "the real-client suite needs Node 20 or later (test/js/package.json engines); found $(node -v)"
    return 1
  fi
  # The cluster bus tests (broker/nats, broker/redis) start their own servers on free
  # loopback ports (internal/servicetest); they never use a service on the default ports.
  local svc missing=0
  for svc in redis-server nats-server; do
    command -v "$svc" >/dev/null || [ -x "/usr/sbin/$svc" ] || [ -x "/usr/bin/$svc" ] || missing=1
  done
  if [ "$missing" -eq 1 ]; then
    apt-get update -qq && apt-get install -y -qq redis-server nats-server
  fi
  # The app store tests (appstore/postgres, appstore/mysql) start their own PostgreSQL and
  # MariaDB on free loopback ports (internal/servicetest); Debian does not put PostgreSQL's
  # programs on the PATH, so look in its versioned directory.
  if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq postgresql
  fi
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || { apt-get update -qq && apt-get install -y -qq mariadb-server; }
  # The browser tests (test/js/tests/console.test.mjs, recovery-browser.test.mjs) drive Debian's chromium.
  command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }
  # test/js/tests/tls-docs.test.mjs runs the docs' openssl command for a self-signed certificate.
  command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl; }
  # The ingest tests run a real Kafka broker from its jars (internal/servicetest/kafka.go):
  # Java 17 or newer, and Maven to fetch the jars once into ~/.cache/herald-kafka.
  if ! command -v java >/dev/null || ! command -v mvn >/dev/null; then
    apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless maven
  fi
  STATICCHECK_VERSION=v0.6.1
  if ! staticcheck -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
    GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
  fi
}

check_gofmt() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go'))
  if [ -n "$unformatted" ]; then
    echo "gofmt would change: $unformatted"
    return 1
  fi
}

# cross_build builds and vets (tests included) for the development systems, where ws runs its
# portable engine instead of epoll, so that a Linux-only call cannot slip in unnoticed.
cross_build() {
  local target
  for target in darwin/arm64 darwin/amd64 windows/amd64; do
    GOOS=${target%/*} GOARCH=${target#*/} go build ./... || return 1
    GOOS=${target%/*} GOARCH=${target#*/} go vet ./... || return 1
  done
}

# npm_ci DIR: npm ci in DIR, tried three times: the registry is on the network, and a shared
# machine's network (or npm's cache, used by concurrent runs) fails now and then.
npm_ci() {
  local attempt
  for attempt in 1 2 3; do
    if (cd "$1" && npm ci --no-audit --no-fund --loglevel=error); then
      return 0
    fi
    echo "npm ci failed (attempt $attempt of 3)"
    [ "$attempt" -lt 3 ] && sleep $((attempt * 10)) # before the next attempt
  done
  return 1
}

run "tools" tools
run "gofmt" check_gofmt
run "go vet" go vet ./...
run "cross-build and vet: darwin/arm64, darwin/amd64, windows/amd64" cross_build
run "staticcheck" staticcheck ./...
run "go test -race" go test -race -count=1 -timeout 15m ./...
# The race run above churns at a reduced rate; this is the full rate (the churn target of
# docs/benchmark-scenarios.md), alone on the machine and without the race detector (under
# which it reaches only about 480 cycles/s here).
run "churn: 1,000 connect/subscribe/disconnect cycles/s for 30s (session TestChurn)" \
  go test -count=1 -timeout 5m -run '^TestChurn$' -v ./session -args -churn.full
run "npm ci (clients/js)" npm_ci clients/js
run "clients/js: the recovery helper against every pusher-js 8.x minor" bash -c 'cd clients/js && npm test'
run "npm ci (test/js)" npm_ci test/js
run "real clients (pusher-js, pusher SDK)" bash -c 'cd test/js && npm test'
