//go:build !linux

// Command herald-chaos runs herald's fault-injection harness; it needs Linux (signals,
// network namespaces), see docs/chaos.md.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "herald-chaos runs on Linux only (it stops processes with SIGSTOP and partitions them with network namespaces)")
	os.Exit(2)
}
