#!/usr/bin/env bash
# The whole test suite, on a fresh clone: installs what it needs, then runs formatting,
# vet, the linter, the Go tests under the race detector, the churn test at full rate, and the
# real-client suite (pusher-js and the pusher server SDK from npm against a herald it builds
# and starts).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
start=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" $((SECONDS - start)); }

step "tools"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  apt-get update -qq && apt-get install -y -qq nodejs npm
fi
STATICCHECK_VERSION=v0.6.1
if ! staticcheck -version 2>/dev/null | grep -q "${STATICCHECK_VERSION#v}"; then
  GOFLAGS= go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
fi

step "gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change: $unformatted"; exit 1; fi

step "go vet"
go vet ./...

step "staticcheck"
staticcheck ./...

step "go test -race"
go test -race -count=1 -timeout 15m ./...

# The race run above churns at a reduced rate; this is the full rate of issue 4, alone on the
# machine and without the race detector (under which it reaches only about 480 cycles/s here).
step "churn: 1,000 connect/subscribe/disconnect cycles/s for 30s (hub TestChurn)"
go test -count=1 -timeout 5m -run '^TestChurn$' -v ./hub -args -churn.full

step "real clients (pusher-js, pusher SDK)"
(cd test/js && npm ci --no-audit --no-fund --loglevel=error && npm test)

step "done"
