// Package busurl reads a cluster bus URL (cluster.url) as the engines do: its engine, TLS,
// servers, and the secrets no log line may show.
package busurl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/herald-rt/herald/broker/redis"
)

// URL is a checked cluster.url.
type URL struct {
	Engine   string   // "nats" or "redis"
	TLS      bool     // rediss://, or a NATS server given as tls://
	Redacted string   // the URL with its passwords and tokens replaced by "xxxxx", for logs
	Secrets  []string // those passwords and tokens, which no log line may show
	Hosts    []string // the servers' host names or addresses
}

// Loopback reports whether every server of the bus is on this machine: a loopback address
// or localhost.
func (u URL) Loopback() bool {
	for _, h := range u.Hosts {
		if ip := net.ParseIP(h); !(strings.EqualFold(h, "localhost") || ip != nil && ip.IsLoopback()) {
			return false
		}
	}
	return true
}

// Parse checks cluster.url and picks the engine by its scheme: nats:// or tls:// (NATS
// over TLS; several servers comma-separated, as nats.go takes them), redis:// or rediss://
// (several comma-separated: shards), redis+cluster:// or redis+sentinel:// (parseRedisURL).
// Its errors never repeat the URL, which may hold a password.
func Parse(raw string) (URL, error) {
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return URL{}, errors.New("want nats://host:port, tls://host:port (NATS over TLS), redis://host:port/db or rediss://host:port/db (several: shards), redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/master")
	}
	switch strings.ToLower(scheme) {
	case "nats", "tls":
		b := URL{Engine: "nats"}
		var shown []string
		for i, s := range strings.Split(raw, ",") {
			s = strings.TrimSpace(s)
			u, err := parseServer(s, "nats", "tls")
			if err != nil {
				return URL{}, fmt.Errorf("server %d: %w", i+1, err)
			}
			b.TLS = b.TLS || u.Scheme == "tls"
			b.Hosts = append(b.Hosts, u.Hostname())
			b.Secrets = append(b.Secrets, userSecrets(s, u, true)...)
			if _, hasPassword := u.User.Password(); u.User != nil && !hasPassword {
				u.User = url.User("xxxxx") // nats://token@host
			}
			shown = append(shown, u.Redacted())
		}
		b.Redacted = strings.Join(shown, ",")
		return b, nil
	case "redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel":
		return parseRedisURL(raw)
	}
	return URL{}, fmt.Errorf("unknown scheme %q: want nats://, tls://, redis://, rediss://, redis+cluster:// or redis+sentinel://", scheme)
}

// parseRedisURL checks a Redis cluster.url: one server, several comma-separated (shards),
// redis+cluster:// (a Redis Cluster) or redis+sentinel:// (a primary behind sentinels), as
// the engine reads them (redis.ParseTopology).
func parseRedisURL(raw string) (URL, error) {
	topo, err := redis.ParseTopology(raw)
	if err != nil {
		return URL{}, err
	}
	scheme, rest, _ := strings.Cut(raw, "://")
	b := URL{Engine: "redis", TLS: strings.HasPrefix(strings.ToLower(scheme), "rediss"), Redacted: redis.Redacted(raw)}
	if topo.Mode == redis.Standalone {
		var shown []string
		for _, s := range strings.Split(raw, ",") {
			s = strings.TrimSpace(s)
			u, err := parseServer(s, "redis", "rediss")
			if err != nil {
				return URL{}, err
			}
			b.TLS = b.TLS || u.Scheme == "rediss"
			b.Hosts = append(b.Hosts, u.Hostname())
			b.Secrets = append(b.Secrets, userSecrets(s, u, false)...)
			shown = append(shown, u.Redacted())
		}
		b.Redacted = strings.Join(shown, ",")
		return b, nil
	}
	// [user[:password]@]host:port,host:port/...: the password, as written and decoded.
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		if _, pass, ok := strings.Cut(authority[:at], ":"); ok {
			b.Secrets = append(b.Secrets, pass)
			if p, err := url.PathUnescape(pass); err == nil {
				b.Secrets = append(b.Secrets, p)
			}
		}
	}
	for _, spec := range topo.Shards {
		for _, a := range spec.Option.InitAddress {
			h, _, _ := net.SplitHostPort(a)
			b.Hosts = append(b.Hosts, h)
		}
	}
	return b, nil
}

// userSecrets returns the password in server URL s (parsed as u), as written and decoded;
// with token, a user name without a password too (NATS reads it as a token).
func userSecrets(s string, u *url.URL, token bool) []string {
	if u.User == nil {
		return nil
	}
	_, authority, _ := strings.Cut(s, "://")
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	at := strings.LastIndex(authority, "@") // as url.Parse: the host has no '@'
	if at < 0 {
		return nil
	}
	user, pass, hasPassword := strings.Cut(authority[:at], ":")
	if p, ok := u.User.Password(); ok && hasPassword {
		return []string{pass, p}
	}
	if token {
		return []string{user, u.User.Username()}
	}
	return nil
}

// parseServer parses one server's URL, which must have one of the schemes and a host.
func parseServer(s string, schemes ...string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a password
		}
		return nil, fmt.Errorf("not a URL: %w", err)
	}
	ok := false
	for _, sc := range schemes {
		ok = ok || u.Scheme == sc
	}
	switch {
	case !ok:
		return nil, fmt.Errorf("scheme %q: want %s://", u.Scheme, strings.Join(schemes, ":// or "))
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("no host")
	}
	return u, nil
}
