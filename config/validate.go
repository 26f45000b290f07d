package config

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"
)

// validate checks the whole configuration and records every problem, each with where the
// value came from. Fields that could not be read at all were reported already and are skipped.
func (l *loader) validate() {
	c := &l.cfg
	if c.Host == "" {
		l.problem("host", "must not be empty")
	}
	if c.Port < 1 || c.Port > 65535 {
		l.problem("port", "%d out of range 1..65535", c.Port)
	}
	l.notNegative("max_connections", c.MaxConnections)
	l.notNegative("workers", c.Workers)
	if c.WriteDelay.Duration < 0 || c.WriteDelay.Duration > 50*time.Millisecond {
		l.problem("write_delay", "%v out of range 0..50ms", c.WriteDelay)
	}
	l.atLeast("max_message_bytes", c.MaxMessageBytes, 1024)
	l.atLeast("outbound_buffer_bytes", c.OutboundBufferBytes, 4096)
	if c.SocketSendBufferBytes != 0 {
		l.atLeast("socket_send_buffer_bytes", c.SocketSendBufferBytes, 4096)
	}
	l.longerThan("frame_timeout", c.FrameTimeout, time.Second)
	l.longerThan("shutdown_timeout", c.ShutdownTimeout, 0)
	l.longerThan("activity_timeout", c.ActivityTimeout, time.Second)
	l.longerThan("pong_timeout", c.PongTimeout, time.Second)
	l.longerThan("rest_timestamp_window", c.RESTTimestampWindow, 0)
	l.longerThan("handshake_timeout", c.HandshakeTimeout, 100*time.Millisecond)
	l.longerThan("rest_request_timeout", c.RESTRequestTimeout, 100*time.Millisecond)
	if c.RESTRequestTimeout.Duration < c.HandshakeTimeout.Duration {
		l.problem("rest_request_timeout", "%v must be at least handshake_timeout (%v): a WebSocket upgrade is an HTTP request too", c.RESTRequestTimeout, c.HandshakeTimeout)
	}
	l.longerThan("rest_idle_timeout", c.RESTIdleTimeout, 100*time.Millisecond)
	l.atLeast("max_http_connections", c.MaxHTTPConnections, 8)
	l.atLeast("rest_replay_max_per_app", c.RESTReplayMaxPerApp, 1024)
	l.notNegative("connection_rate_per_ip", c.ConnectionRatePerIP)
	l.notNegative("connection_burst_per_ip", c.ConnectionBurstPerIP)
	if c.ConnectionIPv6Prefix < 32 || c.ConnectionIPv6Prefix > 128 {
		l.problem("connection_ipv6_prefix", "%d must be from 32 to 128 (64 groups the addresses of one /64)", c.ConnectionIPv6Prefix)
	}
	l.notNegative("memory.limit_bytes", c.Memory.LimitBytes)
	if m := c.Memory; m.RefuseAbovePercent != 0 {
		l.percent("memory.refuse_above_percent", m.RefuseAbovePercent)
		l.percent("memory.accept_below_percent", m.AcceptBelowPercent)
		if m.AcceptBelowPercent >= m.RefuseAbovePercent {
			l.problem("memory.accept_below_percent", "%d must be below memory.refuse_above_percent (%d)", m.AcceptBelowPercent, m.RefuseAbovePercent)
		}
	}
	l.atLeast("cache.max_bytes", c.Cache.MaxBytes, 64<<10)
	l.atLeast("cache.max_bytes_per_app", c.Cache.MaxBytesPerApp, 64<<10)
	if c.Cache.MaxBytesPerApp > c.Cache.MaxBytes {
		l.problem("cache.max_bytes_per_app", "%d must not be above cache.max_bytes (%d)", c.Cache.MaxBytesPerApp, c.Cache.MaxBytes)
	}
	l.longerThan("cache.ttl", c.Cache.TTL, time.Second)
	if c.Metrics.Enabled {
		if c.Metrics.Host == "" {
			l.problem("metrics.host", "must not be empty")
		}
		if c.Metrics.Port < 0 || c.Metrics.Port > 65535 {
			l.problem("metrics.port", "%d out of range 0..65535", c.Metrics.Port)
		} else if c.Metrics.Port != 0 && c.Metrics.Port == c.Port && (c.Metrics.Host == c.Host) {
			l.problem("metrics.port", "%d is the API's port; metrics need their own", c.Metrics.Port)
		}
		if !metricPrefix.MatchString(c.Metrics.Prefix) {
			l.problem("metrics.prefix", "%q must match [a-zA-Z_][a-zA-Z0-9_]*", c.Metrics.Prefix)
		}
	}
	if c.Pprof.Addr != "" {
		if _, port, err := net.SplitHostPort(c.Pprof.Addr); err != nil || port == "" {
			l.problem("pprof.addr", "%q is not host:port", c.Pprof.Addr)
		}
	}
	l.notNegative("pprof.mutex_fraction", c.Pprof.MutexFraction)
	l.notNegative("pprof.block_rate", c.Pprof.BlockRate)
	l.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	l.oneOf("log.format", c.Log.Format, "text", "json")
	l.cluster(&c.Cluster)
	l.console(c)
	l.tls(c)
	l.shutdown(&c.Shutdown)
	l.webhooks(c)
	l.history(c)
	l.publish(c)
	l.storeHistory(c)
	l.appStore(c)

	if len(c.Apps) == 0 && !c.AppStore.On() {
		l.problem("apps", "at least one app is required")
	}
	ids, keys := map[string]int{}, map[string]int{}
	for i := range c.Apps {
		a := &c.Apps[i]
		at := fmt.Sprintf("apps[%d]", i)
		l.name(i, "id", a.ID, ids)
		l.name(i, "key", a.Key, keys)
		if a.Secret == "" {
			l.problem(at+".secret", "must not be empty")
		}
		for _, f := range limitFields {
			l.notNegative(at+".limits."+f.key, *f.ref(&a.Limits))
		}
		if err := l.check.Origins(a.AllowedOrigins); err != nil {
			l.problem(at+".allowed_origins", "%v", err)
		}
	}
	l.ingest()
}

// cluster checks cluster.*: the URL's scheme picks the engine, and the prefix must suit
// both engines, so a cluster can move from one bus to the other.
func (l *loader) cluster(c *ClusterConfig) {
	if c.URL != "" {
		if _, _, err := l.check.BusURL(c.URL); err != nil {
			l.problem("cluster.url", "%v", err)
		}
	}
	switch id := c.NodeID; {
	case len(id) > MaxNodeID:
		l.problem("cluster.node_id", "%d bytes, at most %d", len(id), MaxNodeID)
	case strings.Trim(id, NodeIDChars) != "":
		l.problem("cluster.node_id", "%q may hold only letters, digits, '_', '.' and '-'", id)
	}
	if !l.check.BusPrefix(c.Prefix) {
		l.problem("cluster.prefix", "%q: want printable ASCII without spaces, '*' or '>', and no empty part between dots", c.Prefix)
	} else if strings.HasPrefix(strings.ToLower(c.URL), "redis+cluster") || strings.HasPrefix(strings.ToLower(c.URL), "rediss+cluster") {
		if strings.ContainsAny(c.Prefix, "{}") {
			l.problem("cluster.prefix", "%q: on a Redis Cluster the prefix may not hold '{' or '}' (they make hash tags)", c.Prefix)
		}
	}
	l.longerThan("cluster.heartbeat", c.Heartbeat, 0)
	// Three heartbeats: a node is not declared dead for one or two announcements lost or late.
	if hb := c.Heartbeat.Duration; hb > 0 && !l.failed["cluster.heartbeat"] && c.NodeTimeout.Duration < 3*hb {
		l.problem("cluster.node_timeout", "%v must be at least 3 × cluster.heartbeat (%v × 3 = %v)", c.NodeTimeout, c.Heartbeat, 3*hb)
	}
	l.clusterSecrets(c)
	l.clusterTLS(c)
	l.clusterKeepalive(c)
}

// problem records a problem with the field at path, unless reading it or a table holding it
// failed: that was reported already.
func (l *loader) problem(path, format string, args ...any) {
	for p := path; ; p = p[:strings.LastIndexAny(p, ".[")] {
		if l.failed[p] {
			return
		}
		if !strings.ContainsAny(p, ".[") {
			break
		}
	}
	l.add(path, l.source(path), format, args...)
}

func (l *loader) notNegative(path string, v int) {
	if v < 0 {
		l.problem(path, "%d must not be negative", v)
	}
}

func (l *loader) percent(path string, v int) {
	if v < 1 || v > 100 {
		l.problem(path, "%d out of range 1..100", v)
	}
}

// metricPrefix is what Prometheus allows at the start of a metric name.
var metricPrefix = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func (l *loader) atLeast(path string, v, min int) {
	if v < min {
		l.problem(path, "%d must be at least %d", v, min)
	}
}

func (l *loader) longerThan(path string, d Duration, min time.Duration) {
	switch {
	case min == 0 && d.Duration <= 0:
		l.problem(path, "%v must be positive", d)
	case d.Duration < min:
		l.problem(path, "%v must be at least %v", d, min)
	}
}

func (l *loader) oneOf(path, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	l.problem(path, "%q is not one of %s", v, strings.Join(allowed, ", "))
}

// name checks apps[i].id or apps[i].key: present, made of [A-Za-z0-9_.-] and unique among
// the apps (seen maps each value to the first app that has it).
func (l *loader) name(i int, field, v string, seen map[string]int) {
	path := fmt.Sprintf("apps[%d].%s", i, field)
	switch {
	case v == "":
		l.problem(path, "must not be empty")
		return
	case strings.TrimLeft(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") != "":
		l.problem(path, "%q may hold only letters, digits, '_', '.' and '-'", v)
	}
	if first, dup := seen[v]; dup {
		l.problem(path, "duplicate of apps[%d].%s", first, field)
		return
	}
	seen[v] = i
}
