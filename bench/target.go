package bench

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Target is the server under test and how to load it. The zero value of each field means its
// default.
type Target struct {
	WS     string // WebSocket base URL; default ws://127.0.0.1:6001
	REST   string // REST base URL; default http://127.0.0.1:6001
	AppID  string // default "app-id"
	Key    string // default "app-key"
	Secret string // default "app-secret"

	// ServerPID, when set, is the server's process id: its CPU time and RSS are read from
	// /proc/<pid>. Zero means the server's resources are not reported.
	ServerPID int

	Timeout     time.Duration // deadline of every phase (connect, publish, deliver, close); default 60s
	Concurrency int           // connection attempts in flight at once; default 200
	Rate        float64       // connection attempts started per second; 0 means as fast as possible

	// Timeline, when set, records the run second by second (attempts, failures, open
	// connections, deliveries and their latency); the report carries its points. The caller
	// may Start it for live progress; the scenario stops it when the run ends.
	Timeline *Timeline
	// Metrics is the server's Prometheus endpoint (churn reads connections, channels and
	// goroutines from it); empty means herald's /health on the REST URL.
	Metrics string
	// MetricsPrefix starts the server's metric names ("herald_", "soketi_"); default "herald_".
	MetricsPrefix string

	// Procs, when over 1, spreads the subscribers over that many child processes (idle, fanout
	// and multichannel), each running Child: a command that serves RunChild on its standard
	// input and output. The parent publishes and merges the children's counts and histograms.
	Procs int
	Child []string
}

func (t Target) withDefaults() Target {
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&t.WS, "ws://127.0.0.1:6001")
	def(&t.REST, "http://127.0.0.1:6001")
	def(&t.AppID, "app-id")
	def(&t.Key, "app-key")
	def(&t.Secret, "app-secret")
	def(&t.MetricsPrefix, "herald_")
	if t.Timeout <= 0 {
		t.Timeout = 60 * time.Second
	}
	if t.Concurrency <= 0 {
		t.Concurrency = 200
	}
	return t
}

// endpoint is where clients connect: the TCP address, the Host header and the request path.
type endpoint struct {
	addr, host, path string
	loopback         bool // addr is an IPv4 loopback address: spread clients over source addresses
}

// wsEndpoint resolves the WebSocket URL of the target's app.
func (t Target) wsEndpoint() (endpoint, error) {
	u, err := url.Parse(t.WS)
	if err != nil {
		return endpoint{}, fmt.Errorf("--ws %q: %w", t.WS, err)
	}
	if u.Scheme != "ws" {
		return endpoint{}, fmt.Errorf("--ws %q: only ws:// URLs are supported", t.WS)
	}
	if u.Host == "" {
		return endpoint{}, fmt.Errorf("--ws %q: no host", t.WS)
	}
	addr := u.Host
	if u.Port() == "" {
		addr += ":80"
	}
	path := strings.TrimSuffix(u.Path, "/") + "/app/" + url.PathEscape(t.Key) + "?protocol=7&client=herald-bench&version=0.1"
	return endpoint{addr: addr, host: u.Host, path: path, loopback: isLoopbackV4(addr)}, nil
}

// eventsURL is the REST trigger endpoint and the path the request is signed with.
func (t Target) eventsURL() (full, path string, err error) { return t.restURL("/events") }

// restURL is the app's REST endpoint at suffix ("/events", "/batch_events") and the path the
// request is signed with.
func (t Target) restURL(suffix string) (full, path string, err error) {
	u, err := url.Parse(t.REST)
	if err != nil {
		return "", "", fmt.Errorf("--rest %q: %w", t.REST, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", "", fmt.Errorf("--rest %q: want an http:// or https:// URL", t.REST)
	}
	if u.Host == "" {
		return "", "", fmt.Errorf("--rest %q: no host", t.REST)
	}
	path = strings.TrimSuffix(u.Path, "/") + "/apps/" + t.AppID + suffix
	return u.Scheme + "://" + u.Host + path, path, nil
}

// check validates the target before any connection is made.
func (t Target) check() error {
	var errs []error
	if _, err := t.wsEndpoint(); err != nil {
		errs = append(errs, err)
	}
	if t.ServerPID < 0 {
		errs = append(errs, fmt.Errorf("--server-pid %d: not a process id", t.ServerPID))
	} else if t.ServerPID > 0 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(t.ServerPID) + "/stat"); err != nil {
			errs = append(errs, fmt.Errorf("--server-pid %d: no such process (%w)", t.ServerPID, err))
		}
	}
	if t.Rate < 0 {
		errs = append(errs, fmt.Errorf("--rate %v: must be >= 0", t.Rate))
	}
	if t.Procs > 1 && len(t.Child) == 0 {
		errs = append(errs, fmt.Errorf("--procs %d: no child command to run", t.Procs))
	}
	return errors.Join(errs...)
}
