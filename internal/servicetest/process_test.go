package servicetest

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestProcessFailures: a process that exits before answering is reported with its log; one
// that never answers is killed once within has passed.
func TestProcessFailures(t *testing.T) {
	p := &process{name: "sh", dir: t.TempDir(), tail: 100, every: 10 * time.Millisecond}
	never := func() error { return errors.New("no answer") }
	err := p.run(1, Ready, never, "/bin/sh", "-c", "echo going away; exit 3")
	if err == nil || !strings.Contains(err.Error(), "sh exited on port 1 before answering") || !strings.Contains(err.Error(), "going away") {
		t.Errorf("exited: %v", err)
	}
	if p.cmd != nil {
		t.Error("an exited process is still held")
	}
	err = p.run(2, 200*time.Millisecond, never, "/bin/sh", "-c", "exec sleep 60")
	if err == nil || !strings.Contains(err.Error(), "did not answer within 200ms (last: no answer)") {
		t.Errorf("silent: %v", err)
	}
	if p.cmd != nil {
		t.Error("a process that did not answer was not killed")
	}
}
