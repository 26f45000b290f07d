#!/usr/bin/env bash
# release.sh cross-builds static herald and herald-bench (the load generator) binaries for
# linux/amd64, linux/arm64 and darwin/arm64 into dist/, packs the recovery helper (clients/js, @herald-rt/recovery) into its npm tarball
# there (`npm install ./herald-rt-recovery-<version>.tgz`: no registry needed), and writes a
# SHA-256 checksum file beside them.
#
#   scripts/release.sh [version]      # default: git describe --tags --always --dirty
#
# The binaries are static (CGO_ENABLED=0), reproducible across machines (-trimpath), stripped
# (-s -w), and report the version (herald version, /health, herald_build_info). The darwin
# binary runs the portable connection engine (package ws): a development build.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${1:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
command -v npm >/dev/null || { echo "release.sh: npm is needed to pack clients/js (apt-get install -y npm)" >&2; exit 1; }
TARGETS=(linux/amd64 linux/arm64 darwin/arm64)

rm -rf dist
mkdir -p dist
for target in "${TARGETS[@]}"; do
  goos=${target%/*} goarch=${target#*/}
  for cmd in herald herald-bench; do
    out="dist/${cmd}-${VERSION}-${goos}-${goarch}"
    CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" -o "$out" "./cmd/$cmd"
    echo "built $out"
  done
done
# The helper's tarball: the files package.json lists, under its own version (package.json's
# "version"); herald also serves the same index.js at /client/recovery.mjs.
tarball=$(npm pack ./clients/js --pack-destination dist --silent)
echo "packed dist/$tarball"
(cd dist && sha256sum herald-* > SHA256SUMS)
echo "checksums: dist/SHA256SUMS"
ls -l dist
