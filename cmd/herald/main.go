// Command herald runs a Pusher-compatible real-time messaging server.
//
//	herald [serve] [flags]         run a node (the default)
//	herald check-config [flags]    validate the configuration and exit
//	herald bench <scenario>        run herald-bench (the load generator, its own command)
//	herald version                 print the version (also --version)
//	herald help                    list the commands (also -h)
//
// main only wires the packages together and handles signals.
package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/herald-rt/herald/internal/buildinfo"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3"; left empty,
// buildVersion reads one from the binary's build information.
var version string

// usage lists the commands, one line each.
const usage = `usage: herald <command> [flags]

Commands:
  serve          run a node (the default command; "herald serve -h" lists its flags)
  check-config   validate the configuration (file, environment, flags) and exit
  bench          run herald-bench, the load generator ("herald-bench -h")
  version        print the version (also "herald --version")
  help           print this list (also "herald -h")
`

// buildVersion is herald's version: the one set at build time, else the main module's
// version or VCS revision recorded by the go command, else "dev".
func buildVersion() string { return buildinfo.Version(version) }

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

func run(args []string, env func(string) string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && (!strings.HasPrefix(args[0], "-") || isTopFlag(args[0])) {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, env, stderr, false)
	case "check-config":
		return serve(args, env, stderr, true)
	case "bench":
		return benchAlias(args, stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, "herald", buildVersion())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "herald: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}

// isTopFlag reports whether arg is a flag of herald itself rather than of serve.
func isTopFlag(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "-version", "--version":
		return true
	}
	return false
}
