package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
)

// benchCommand is the load generator's own command, which the server does not link.
const benchCommand = "herald-bench"

// benchAlias runs "herald bench <args>" as "herald-bench <args>": the herald-bench beside
// this executable, else the one on PATH. SIGINT and SIGTERM go on to it; its exit status is
// the alias's.
func benchAlias(args []string, stdout, stderr io.Writer) int {
	path, err := findBench()
	if err != nil {
		fmt.Fprintf(stderr, "herald bench: the load generator is the command %s (go install ./cmd/%s): %v\n", benchCommand, benchCommand, err)
		return 1
	}
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "herald bench: %v\n", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case s := <-sig:
			_ = cmd.Process.Signal(s)
		case err := <-done:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return exit.ExitCode()
			}
			if err != nil {
				fmt.Fprintf(stderr, "herald bench: %v\n", err)
				return 1
			}
			return 0
		}
	}
}

// findBench finds herald-bench: beside this executable, else on PATH.
func findBench() (string, error) {
	if exe, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(exe), benchCommand)
		if p, err := exec.LookPath(beside); err == nil {
			return p, nil
		}
	}
	return exec.LookPath(benchCommand)
}
