#!/usr/bin/env bash
# release.sh cross-builds static herald binaries for linux/amd64, linux/arm64 and darwin/arm64
# into dist/, with a SHA-256 checksum file beside them.
#
#   scripts/release.sh [version]      # default: git describe --tags --always --dirty
#
# The binaries are static (CGO_ENABLED=0), reproducible across machines (-trimpath), stripped
# (-s -w), and report the version (herald version, /health, herald_build_info). The darwin
# binary runs the portable connection engine (package ws): a development build.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
TARGETS=(linux/amd64 linux/arm64 darwin/arm64)

rm -rf dist
mkdir -p dist
for target in "${TARGETS[@]}"; do
  goos=${target%/*} goarch=${target#*/}
  out="dist/herald-${VERSION}-${goos}-${goarch}"
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath \
    -ldflags "-s -w -X main.version=${VERSION}" -o "$out" ./cmd/herald
  echo "built $out"
done
(cd dist && sha256sum herald-* > SHA256SUMS)
echo "checksums: dist/SHA256SUMS"
ls -l dist
