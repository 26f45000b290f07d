// Command herald runs a Pusher-compatible real-time messaging server.
//
//	herald [serve] [flags]    run a node (the default)
//	herald check-config       validate the configuration and exit
//	herald version            print the version
//
// main only wires the packages together and handles signals.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, env func(string) string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, env, stderr, false)
	case "check-config":
		return serve(args, env, stderr, true)
	case "bench":
		return benchCmd(args, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "herald", version)
		return 0
	default:
		fmt.Fprintf(stderr, "herald: unknown command %q (commands: serve, check-config, bench, version)\n", cmd)
		return 2
	}
}
