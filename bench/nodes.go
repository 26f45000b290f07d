package bench

import (
	"crypto/tls"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// A target may be a cluster: Target.WS lists the nodes' WebSocket URLs, comma-separated, and
// connection i of a run (its index over the whole run, also across child processes) goes to
// node i mod N. Publishes all go to Target.REST, one node, but with multichannel's Spread. Target.ServerPIDs names the
// server's processes, one per node or one for the whole server.

// splitList splits a comma-separated flag value into its elements, trimmed of spaces. An empty
// element (",," or a trailing comma) is an error naming the flag.
func splitList(flag, s string) ([]string, error) {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			if len(parts) == 1 {
				return nil, fmt.Errorf("%s: empty", flag)
			}
			return nil, fmt.Errorf("%s %q: element %d of %d is empty", flag, s, i+1, len(parts))
		}
		parts[i] = p
	}
	return parts, nil
}

// ParsePIDs parses the value of --server-pid: one process id, or a comma-separated list of
// them, one per --ws node. "" and "0" mean none. Errors name the flag.
func ParsePIDs(s string) ([]int, error) { return parsePIDs("--server-pid", s) }

// ParseBusPIDs parses the value of --bus-pid as ParsePIDs does --server-pid's.
func ParseBusPIDs(s string) ([]int, error) { return parsePIDs("--bus-pid", s) }

func parsePIDs(flag, s string) ([]int, error) {
	if s = strings.TrimSpace(s); s == "" || s == "0" {
		return nil, nil
	}
	parts, err := splitList(flag, s)
	if err != nil {
		return nil, err
	}
	pids := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			if len(parts) == 1 {
				return nil, fmt.Errorf("%s %q: not a process id", flag, s)
			}
			return nil, fmt.Errorf("%s %q: element %d (%q) is not a process id", flag, s, i+1, p)
		}
		pids[i] = n
	}
	return pids, nil
}

// wsNodes returns the nodes' WebSocket base URLs: t.WS split at commas.
func (t Target) wsNodes() ([]string, error) { return splitList("--ws", t.WS) }

// nodeOf returns the node that connection i of a run goes to, of n nodes.
func nodeOf(i, n int) int { return i % n }

// wsEndpoints resolves the WebSocket URL of the target's app on every node, in --ws order.
func (t Target) wsEndpoints() ([]endpoint, error) {
	nodes, err := t.wsNodes()
	if err != nil {
		return nil, err
	}
	eps := make([]endpoint, len(nodes))
	for k, raw := range nodes {
		name := "--ws"
		if len(nodes) > 1 {
			name = fmt.Sprintf("--ws node %d", k+1)
		}
		if eps[k], err = wsEndpointOf(name, raw, t.Key); err != nil {
			return nil, err
		}
		eps[k].sources = t.Sources
		if eps[k].tls != nil {
			if eps[k].tls.RootCAs, err = t.roots(); err != nil {
				return nil, err
			}
		}
	}
	return eps, nil
}

// wsEndpointOf resolves one WebSocket base URL; name says which flag (and node) it came from.
func wsEndpointOf(name, raw, key string) (endpoint, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return endpoint{}, fmt.Errorf("%s %q: %w", name, raw, err)
	}
	if u.Scheme != "ws" && u.Scheme != "wss" {
		return endpoint{}, fmt.Errorf("%s %q: only ws:// and wss:// URLs are supported", name, raw)
	}
	if u.Host == "" {
		return endpoint{}, fmt.Errorf("%s %q: no host", name, raw)
	}
	addr := u.Host
	var cfg *tls.Config
	if u.Scheme == "wss" {
		// HTTP/1.1, as a browser negotiates for a WebSocket; the roots are set by wsEndpoints.
		cfg = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12,
			ClientSessionCache: tls.NewLRUClientSessionCache(1024)}
	}
	if u.Port() == "" {
		addr += map[bool]string{false: ":80", true: ":443"}[cfg != nil]
	}
	path := strings.TrimSuffix(u.Path, "/") + "/app/" + url.PathEscape(key) + "?protocol=7&client=herald-bench&version=0.1"
	return endpoint{addr: addr, host: u.Host, path: path, loopback: isLoopbackV4(addr), tls: cfg}, nil
}

// httpBase derives a node's HTTP base URL from its WebSocket base URL: ws becomes http, wss
// https, with the same host, port and path.
func httpBase(wsURL string) (string, error) {
	u, err := url.Parse(wsURL)
	if err != nil {
		return "", err
	}
	switch u.Scheme {
	case "ws":
		u.Scheme = "http"
	case "wss":
		u.Scheme = "https"
	default:
		return "", fmt.Errorf("%q: not a ws:// or wss:// URL", wsURL)
	}
	if u.Host == "" {
		return "", fmt.Errorf("%q: no host", wsURL)
	}
	return u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/"), nil
}

// restNodes returns the HTTP base URL of every node, for requests each node must answer
// (/health, a presence channel's user count): the REST URL with one node; with several, each
// --ws node's URL with http for ws (https for wss).
func (t Target) restNodes() ([]string, error) {
	nodes, err := t.wsNodes()
	if err != nil {
		return nil, err
	}
	if len(nodes) == 1 {
		u, err := url.Parse(t.REST)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("--rest %q: not a URL with a host", t.REST)
		}
		return []string{u.Scheme + "://" + u.Host + strings.TrimSuffix(u.Path, "/")}, nil
	}
	bases := make([]string, len(nodes))
	for k, n := range nodes {
		if bases[k], err = httpBase(n); err != nil {
			return nil, fmt.Errorf("--ws node %d: no HTTP URL: %w", k+1, err)
		}
	}
	return bases, nil
}

// metricsURLs returns the server's Prometheus endpoints: t.Metrics split at commas, each an
// http:// or https:// URL; nil when t.Metrics is empty.
func (t Target) metricsURLs() ([]string, error) {
	if t.Metrics == "" {
		return nil, nil
	}
	return parseMetricsURLs(t.Metrics)
}

func parseMetricsURLs(s string) ([]string, error) {
	urls, err := splitList("--metrics", s)
	if err != nil {
		return nil, err
	}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("--metrics %q: %w", raw, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--metrics %q: want an http:// or https:// URL with a host", raw)
		}
	}
	return urls, nil
}
