package bench

import (
	"crypto/tls"
	"crypto/x509"
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
	// WS is the server's WebSocket base URL or, for a cluster, its nodes' URLs separated by
	// commas: connection i of a run (counted over the whole run, child processes included)
	// goes to node i mod N. Default ws://127.0.0.1:6001.
	WS string
	// REST is the REST base URL of the one node every publish goes to (but multichannel's
	// Spread, which posts to every node); default http://127.0.0.1:6001.
	REST string
	// Publish, when set, sends the scenario's events to a Kafka topic
	// (kafka://host:port/topic) or a Redis stream or pub/sub channel
	// (redis://host:port/db?stream=name, ?channel=name) instead of the REST API: one record
	// per event in the pusher format, for a herald ingest source with format: pusher.
	Publish string
	// CAFile is a PEM file of roots trusted for wss:// and https:// besides the system's (a
	// server whose certificate a private CA signed).
	CAFile string
	AppID  string // default "app-id"
	Key    string // default "app-key"
	Secret string // default "app-secret"

	// ServerPIDs, when set, are the server's process ids: its CPU time and RSS are read from
	// /proc/<pid>. One pid is the whole server (however many nodes WS lists); several are one
	// per WS node, in the same order: CPU time is summed over them and RSS reported per node
	// and in total. Empty means the server's resources are not reported.
	ServerPIDs []int
	// BusPIDs, when set, are the processes of a cluster's bus servers (nats-server,
	// redis-server) on this machine: their CPU time over each scenario's window is added to
	// the server's, and reported apart. They need ServerPIDs.
	BusPIDs []int

	Timeout     time.Duration // deadline of every phase (connect, publish, deliver, close); default 60s
	Concurrency int           // connection attempts in flight at once; default 200
	Rate        float64       // connection attempts started per second; 0 means as fast as possible
	// ActivityTimeout is the clients' own activity timeout, pusher-js's activityTimeout option
	// (idle, fanout and multichannel, ping.go): a client that received nothing for this long,
	// or for the server's activity_timeout when that is shorter, sends pusher:ping. Zero means
	// pusher-js's default, 120 s; negative, that clients never ping first.
	ActivityTimeout time.Duration
	// Sources is how many loopback source addresses clients of a loopback target connect
	// from: client i from the (i mod Sources)-th after 127.0.0.0 (127.0.0.1, 127.0.0.2, ...,
	// 127.0.1.0, ...), the same on every connection it makes, so that a server sees as many
	// client addresses as real users would bring (per-address limits, replay budgets). Zero
	// means 8; at most MaxSources.
	Sources int

	// Timeline, when set, records the run second by second (attempts, failures, open
	// connections, deliveries and their latency); the report carries its points. The caller
	// may Start it for live progress; the scenario stops it when the run ends.
	Timeline *Timeline
	// Metrics is the server's Prometheus endpoint or, comma-separated, one per node: churn
	// reads connections, channels and goroutines from it, summed over the endpoints. Empty
	// means herald's /health: on the REST URL for one node; with several, on every node
	// (its WS URL with http for ws, https for wss), summed.
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
	loopback         bool        // addr is an IPv4 loopback address: spread clients over source addresses
	sources          int         // how many (Target.Sources)
	tls              *tls.Config // wss://: the client's TLS configuration; nil for ws://
}

// eventsURL is the REST trigger endpoint and the path the request is signed with.
func (t Target) eventsURL() (full, path string, err error) { return t.restURL("/events") }

// restURL is the app's REST endpoint at suffix ("/events", "/batch_events") and the path the
// request is signed with.
func (t Target) restURL(suffix string) (full, path string, err error) {
	if strings.Contains(t.REST, ",") {
		return "", "", fmt.Errorf("--rest %q: one URL, the node publishes go to", t.REST)
	}
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

// Check validates the target as every scenario does before it connects: the --ws nodes, the
// server pids (one, or one per node) and the --metrics URLs. Each error names its flag.
func (t Target) Check() error { return t.withDefaults().check() }

// check validates the target before any connection is made.
func (t Target) check() error {
	var errs []error
	if t.Publish != "" {
		if _, _, err := parsePublish(t.Publish); err != nil {
			errs = append(errs, err)
		}
	}
	eps, err := t.wsEndpoints()
	if err != nil {
		errs = append(errs, err)
	}
	for _, pid := range t.ServerPIDs {
		if pid <= 0 {
			errs = append(errs, fmt.Errorf("--server-pid %d: not a process id", pid))
		} else if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil {
			errs = append(errs, fmt.Errorf("--server-pid %d: no such process (%w)", pid, err))
		}
	}
	for _, pid := range t.BusPIDs {
		if pid <= 0 {
			errs = append(errs, fmt.Errorf("--bus-pid %d: not a process id", pid))
		} else if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil {
			errs = append(errs, fmt.Errorf("--bus-pid %d: no such process (%w)", pid, err))
		}
	}
	if len(t.BusPIDs) > 0 && len(t.ServerPIDs) == 0 {
		errs = append(errs, errors.New("--bus-pid: needs --server-pid"))
	}
	if n := len(t.ServerPIDs); n > 1 && eps != nil && n != len(eps) {
		errs = append(errs, fmt.Errorf("--server-pid: %d pids for %d --ws nodes; give one pid for the whole server or one per node", n, len(eps)))
	}
	if _, err := t.metricsURLs(); err != nil {
		errs = append(errs, err)
	}
	if t.Sources < 0 || t.Sources > MaxSources {
		errs = append(errs, fmt.Errorf("--sources %d: must be between 1 and %d (0: the default, %d)", t.Sources, MaxSources, loopbackSources))
	}
	if t.Rate < 0 {
		errs = append(errs, fmt.Errorf("--rate %v: must be >= 0", t.Rate))
	}
	if t.Procs > 1 && len(t.Child) == 0 {
		errs = append(errs, fmt.Errorf("--procs %d: no child command to run", t.Procs))
	}
	return errors.Join(errs...)
}

// roots are the system's roots and CAFile's; nil (the system's) without CAFile.
func (t Target) roots() (*x509.CertPool, error) {
	if t.CAFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", t.CAFile)
	}
	return pool, nil
}
