package nats

import (
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// How a server that stops answering without closing the connection (a machine lost, a
// network cut) is noticed: a PING every PingInterval, and the connection is given up when
// MaxPingsOutstanding of them are unanswered, so within about PingInterval ×
// (MaxPingsOutstanding + 1), 12 s. A server killed on a machine that lives closes the
// connection: that is noticed at once. (Shorter, 2 s × 2, gave up connections to a live
// server on a machine at a load of 200 with -race, losing messages.) Config.PingInterval and
// Config.PingsOutstanding override them (cluster.nats_ping_interval and
// cluster.nats_pings_outstanding): looser for a machine whose processes wait seconds for a CPU.
const (
	PingInterval        = 3 * time.Second
	MaxPingsOutstanding = 3
)

// MaxHistoryReplicas is the most replicas a JetStream stream may have.
const MaxHistoryReplicas = 5

// connect connects to the servers of url, comma-separated, trying them in the order given:
// the first is the node's server while it answers; the others, and those the cluster
// announces (discovered in the server's INFO), are tried in random order when it fails.
// Giving each node a different first server spreads the nodes over the cluster.
func connect(url string, opts []nats.Option) (*nats.Conn, error) {
	o := nats.GetDefaultOptions()
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	for _, s := range strings.Split(url, ",") {
		switch s = strings.TrimSpace(s); {
		case s == "":
		case o.Url == "":
			o.Url = s // tried first (nats.go shuffles Servers unless NoRandomize)
		default:
			o.Servers = append(o.Servers, s)
		}
	}
	return o.Connect()
}

// server describes the server nc is connected to, for a log line: its name, its cluster's,
// its URL (without credentials) and how many others of the cluster it announced.
func server(nc *nats.Conn) []any {
	return []any{"server", nc.ConnectedServerName(), "server_url", nc.ConnectedUrlRedacted(),
		"server_cluster", nc.ConnectedClusterName(), "servers_discovered", len(nc.DiscoveredServers())}
}

// serverAtLeast reports whether the NATS server the broker is connected to now is of release
// major.minor or later; false when it cannot tell (not connected, a version it cannot read).
func (b *Broker) serverAtLeast(major, minor int) bool {
	v := strings.TrimPrefix(b.nc.ConnectedServerVersion(), "v")
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
