package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchAlias: "herald bench" runs the herald-bench beside it with the same arguments,
// output and exit status, and without one says which command it needs.
func TestBenchAlias(t *testing.T) {
	if testing.Short() {
		t.Skip("builds herald and herald-bench")
	}
	dir := t.TempDir()
	for _, pkg := range []string{".", "../herald-bench"} {
		if out, err := exec.Command("go", "build", "-o", dir+"/", pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	alone := t.TempDir()
	data, err := os.ReadFile(filepath.Join(dir, "herald"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(alone, "herald"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bin    string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{dir, []string{"bench"}, 2, "", "usage: herald-bench <scenario> [flags]"},
		{dir, []string{"bench", "help"}, 0, "", "usage: herald-bench <scenario> [flags]"},
		{dir, []string{"bench", "nonsense"}, 2, "", `herald-bench: unknown scenario "nonsense"`},
		{dir, []string{"bench", "idle", "--ws", "http://x"}, 2, "", "herald-bench idle: "},
		{alone, []string{"bench", "idle"}, 1, "", "herald bench: the load generator is the command herald-bench"},
	} {
		cmd := exec.Command(filepath.Join(c.bin, "herald"), c.args...)
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir()) // no herald-bench on PATH
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(stderr.String(), c.stderr) {
			t.Errorf("herald %v (in %s): exit %d, stderr %q; want exit %d and %q", c.args, c.bin, code, stderr.String(), c.code, c.stderr)
		}
	}
}
