package servicetest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// process is one service's child process with its output in a log file: run starts it and
// waits until it answers, kill stops exactly that pid. Server and Kafka each keep one.
type process struct {
	name  string        // "redis-server", "kafka": in errors and in the log files' names
	dir   string        // where the log files go
	tail  int           // how many bytes of the log an error quotes
	every time.Duration // the polling interval while the process starts
	env   []string      // added to the environment herald's tests run in
	log   string
	// prepare, when set, adjusts each command before it starts (the user it runs as).
	prepare func(*exec.Cmd)
	// quit, when set, is the signal kill sends first (postgres's immediate shutdown, which
	// takes its backends with it); SIGKILL follows if the process has not exited in 10 s.
	quit os.Signal
	cmd  *exec.Cmd     // nil while stopped
	done chan struct{} // closed when cmd has exited
}

// run starts argv and polls probe until it answers (nil); it fails when the process exits
// first, or kills it when within has passed. port is the one the process listens on, for the
// errors.
func (p *process) run(port int, within time.Duration, probe func() error, argv ...string) error {
	p.log = filepath.Join(p.dir, fmt.Sprintf("%s-%d.log", p.name, time.Now().UnixNano()))
	out, err := os.Create(p.log)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	if p.env != nil {
		cmd.Env = append(os.Environ(), p.env...)
	}
	orphanProof(cmd)
	if p.prepare != nil {
		p.prepare(cmd)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", argv[0], err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() { _ = cmd.Wait(); close(done) }()

	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-done:
			p.cmd = nil
			return fmt.Errorf("%s exited on port %d before answering (%v); log: %s", p.name, port, cmd.ProcessState, p.logTail())
		default:
		}
		if last = probe(); last == nil {
			return nil
		}
		time.Sleep(p.every) // polling interval while the process starts
	}
	p.kill()
	return fmt.Errorf("%s on port %d did not answer within %v (last: %v); log: %s", p.name, port, within, last, p.logTail())
}

func (p *process) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > p.tail {
		b = b[len(b)-p.tail:]
	}
	return strings.TrimSpace(string(b))
}

// kill stops the process with SIGKILL, as a crash would (or with quit first, when set), and
// waits for it to exit.
func (p *process) kill() {
	if p.cmd == nil {
		return
	}
	if p.quit != nil {
		_ = p.cmd.Process.Signal(p.quit)
		select {
		case <-p.done:
			p.cmd = nil
			return
		case <-time.After(10 * time.Second):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	p.cmd = nil
}

// anyPort returns a loopback port that was free a moment ago.
func anyPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
