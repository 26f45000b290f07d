//go:build linux

package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process the harness starts, and starts again after a kill: its output is
// appended to one log file, and the harness signals only the process it started (os.Process
// signals through a pidfd, never a pid reused after the process was reaped).
type proc struct {
	name string
	argv []string
	log  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// start starts the process; it fails if it is running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("%s: start while running", p.name)
		}
	}
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	fmt.Fprintf(out, "=== %s: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(p.argv, " "))
	cmd := exec.Command(p.argv[0], p.argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	// The kernel kills the child if the harness dies without stopping it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() { _ = cmd.Wait(); close(done) }()
	return nil
}

// exited returns a channel closed once the process last started has exited (closed at once
// when it never started).
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.done
}

// signal sends sig to the running process.
func (p *proc) signal(sig os.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s: not started", p.name)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("%s: exited", p.name)
		}
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// kill sends SIGKILL and waits for the process to exit; a process that has exited is left.
func (p *proc) kill() {
	done := p.exited()
	_ = p.signal(syscall.SIGKILL) // an error: it has exited already
	<-done
}

// stop sends SIGTERM and waits within d, then kills.
func (p *proc) stop(d time.Duration) {
	done := p.exited()
	_ = p.signal(syscall.SIGCONT) // a stopped process cannot act on SIGTERM
	if p.signal(syscall.SIGTERM) == nil {
		select {
		case <-done:
			return
		case <-time.After(d):
		}
	}
	p.kill()
}

// pid is the running process's pid, or 0.
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	select {
	case <-p.done:
		return 0
	default:
		return p.cmd.Process.Pid
	}
}

// logTail returns the last n bytes of the process's log.
func (p *proc) logTail(n int) string {
	b, _ := os.ReadFile(p.log)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
