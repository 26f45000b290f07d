package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/herald-rt/herald/internal/poll"
)

// serveHelper runs `herald serve` with args (as TestHelperServe, the test binary run again)
// until the test ends, waits until its /health on addr decodes into health, and returns its
// output. The process gets SIGTERM at the test's end (SIGKILL 30 s later), and its output is
// logged when the test failed.
func serveHelper(t *testing.T, addr, args string, health any) *syncBuffer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServe$")
	cmd.Env = append(os.Environ(), "HERALD_HELPER_SERVE="+args)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("herald's log:\n%s", logs.String())
		}
	})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	poll.NoError(t, 60*time.Second, "herald to answer /health", func() error {
		select {
		case err := <-exited:
			return fmt.Errorf("herald exited: %v\n%s", err, logs.String())
		default:
		}
		resp, err := client.Get("http://" + addr + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(health)
	})
	return logs
}
