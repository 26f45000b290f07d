package servicetest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// NATSReplicatedVersion is the newer nats-server that tests of replicated JetStream streams
// (herald's history.replicas above 1) run besides Debian's 2.9.10: the first release that
// checks a publish's expected last sequence of its subject against the publishes of the
// subject still being stored too, and refuses a publish while another is (which herald
// handles), built from the Go module proxy once and cached (like pebble).
const NATSReplicatedVersion = "v2.11.0"

// NATSClusterReplicated is NATSClusterJetStream of nats-server NATSReplicatedVersion (or of the
// binary HERALD_NATS_SERVER_REPLICATED names). Without the go command it fails the test
// (under -short it skips).
func NATSClusterReplicated(t testing.TB, n int) *NATSCluster {
	t.Helper()
	return natsCluster(t, n, natsReplicatedBinary(t))
}

// natsReplicatedBinary returns nats-server NATSReplicatedVersion, built once into the user's
// cache (herald-nats-server/<version>).
func natsReplicatedBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("HERALD_NATS_SERVER_REPLICATED"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "herald-nats-server", NATSReplicatedVersion)
	bin := filepath.Join(dir, "nats-server")
	if fileExists(bin) {
		return bin
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		if testing.Short() {
			t.Skip("no go command to build nats-server " + NATSReplicatedVersion + " (-short: skipping)")
		}
		t.Fatal("no go command to build nats-server " + NATSReplicatedVersion + " with (or set HERALD_NATS_SERVER_REPLICATED to one)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Built beside, then renamed into place: another test binary may build it at the same
	// moment, and either build will do.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	c := exec.CommandContext(ctx, goBin, "install", "github.com/nats-io/nats-server/v2@"+NATSReplicatedVersion)
	c.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod")
	c.Dir = os.TempDir() // outside herald's module
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("go install nats-server@%s: %v\n%s", NATSReplicatedVersion, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "nats-server"), bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
