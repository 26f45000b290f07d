package redis

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// Mode is how a Broker reaches Redis, chosen by the form of Config.URL.
type Mode string

// The modes of Config.URL.
const (
	// Standalone: one Redis server, or several comma-separated, each a shard
	// (redis://a:6379,redis://b:6379).
	Standalone Mode = "standalone"
	// Cluster: a Redis Cluster (redis+cluster://host:port,host:port), with sharded pub/sub
	// (SSUBSCRIBE, SPUBLISH: Redis 7 or later).
	Cluster Mode = "cluster"
	// Sentinel: a primary found through Redis Sentinel and followed through its failovers
	// (redis+sentinel://s1:26379,s2:26379,s3:26379/mymaster).
	Sentinel Mode = "sentinel"
)

// ClusterSlots is how many groups the channels are split into on a Redis Cluster: a group is
// one hash slot (its keys and pub/sub channels share the hash tag {<prefix>.<group>}) and one
// subscriber connection per node of herald. Fixed: every node must place a channel alike.
const ClusterSlots = 16

// Topology is a parsed Config.URL: its mode and one client option per shard (for a Redis
// Cluster and a Sentinel, one option reaching all its servers).
type Topology struct {
	Mode   Mode
	Shards []ShardSpec
}

// ShardSpec is one standalone shard, or the servers of a cluster or sentinel set.
type ShardSpec struct {
	// ID places channels (Rendezvous): the host:port (and /db when not 0) as written in the
	// URL, host in lower case. Every node must write a shard alike; the order does not matter.
	ID     string
	Option rueidis.ClientOption
}

// ParseTopology parses a Config.URL. Its errors never repeat the URL, which may hold a
// password.
func ParseTopology(raw string) (Topology, error) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(raw), "://")
	if !ok {
		return Topology{}, errors.New("want redis://host:port[/db], rediss://, several of them comma-separated, redis+cluster://host:port,host:port or redis+sentinel://host:port,host:port/master")
	}
	switch strings.ToLower(scheme) {
	case "redis", "rediss":
		return parseShards(raw)
	case "redis+cluster", "rediss+cluster":
		opt, err := parseMulti(strings.TrimSuffix(strings.ToLower(scheme), "+cluster"), rest, false)
		if err != nil {
			return Topology{}, err
		}
		return Topology{Mode: Cluster, Shards: []ShardSpec{{ID: "cluster", Option: opt}}}, nil
	case "redis+sentinel", "rediss+sentinel":
		opt, err := parseMulti(strings.TrimSuffix(strings.ToLower(scheme), "+sentinel"), rest, true)
		if err != nil {
			return Topology{}, err
		}
		return Topology{Mode: Sentinel, Shards: []ShardSpec{{ID: "sentinel", Option: opt}}}, nil
	}
	return Topology{}, fmt.Errorf("unknown scheme %q: want redis://, rediss://, redis+cluster://, rediss+cluster://, redis+sentinel:// or rediss+sentinel://", scheme)
}

// parseShards parses one or several comma-separated redis:// or rediss:// URLs.
func parseShards(raw string) (Topology, error) {
	t := Topology{Mode: Standalone}
	seen := map[string]int{}
	parts := strings.Split(raw, ",")
	for i, s := range parts {
		s = strings.TrimSpace(s)
		opt, err := rueidis.ParseURL(s)
		if err != nil {
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err // without the URL, which may hold a password
			}
			return Topology{}, shardErr(i, len(parts), err)
		}
		if scheme, _, _ := strings.Cut(s, "://"); scheme != "redis" && scheme != "rediss" {
			return Topology{}, shardErr(i, len(parts), fmt.Errorf("scheme %q: want redis:// or rediss://", scheme))
		}
		if len(opt.InitAddress) != 1 || opt.Sentinel.MasterSet != "" {
			return Topology{}, shardErr(i, len(parts), errors.New("one server per URL (addr= and master_set= are not taken: use redis+cluster:// or redis+sentinel://)"))
		}
		id := strings.ToLower(opt.InitAddress[0])
		if opt.SelectDB != 0 {
			id += "/" + strconv.Itoa(opt.SelectDB)
		}
		if j, dup := seen[id]; dup {
			return Topology{}, fmt.Errorf("servers %d and %d are the same shard (%s)", j+1, i+1, id)
		}
		seen[id] = i
		t.Shards = append(t.Shards, ShardSpec{ID: id, Option: opt})
	}
	return t, nil
}

func shardErr(i, n int, err error) error {
	if n == 1 {
		return err
	}
	return fmt.Errorf("server %d: %w", i+1, err)
}

// parseMulti parses the part after "redis+cluster://" or "redis+sentinel://":
// [user[:password]@]host:port,host:port[/...][?query]. For a sentinel set the path is
// /master[/db]; for a cluster it is empty. base is "redis" or "rediss". The password is the
// data servers' (for a sentinel set, the primary's), never the sentinels'.
func parseMulti(base, rest string, sentinel bool) (rueidis.ClientOption, error) {
	var opt rueidis.ClientOption
	authority, path := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	var query string
	path, query, _ = strings.Cut(path, "?")
	if strings.Contains(path, "#") {
		return opt, errors.New("a fragment (#) is not taken")
	}
	user := ""
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user, authority = authority[:at], authority[at+1:]
	}
	if authority == "" {
		return opt, errors.New("no host")
	}
	seen := map[string]bool{}
	for i, h := range strings.Split(authority, ",") {
		h = strings.TrimSpace(h)
		host, port, err := net.SplitHostPort(h)
		if err != nil || host == "" {
			return opt, fmt.Errorf("server %d: want host:port", i+1)
		}
		if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
			return opt, fmt.Errorf("server %d: port %q", i+1, port)
		}
		addr := net.JoinHostPort(strings.ToLower(host), port)
		if seen[addr] {
			return opt, fmt.Errorf("server %d: %s is listed twice", i+1, addr)
		}
		seen[addr] = true
		opt.InitAddress = append(opt.InitAddress, addr)
	}
	// The rest (user, password, TLS, database, options) as rueidis reads it from one URL.
	one := base + "://"
	if user != "" {
		one += user + "@"
	}
	one += opt.InitAddress[0]
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if path == "" || path == "/" {
		segs = nil
	}
	master := ""
	switch {
	case sentinel && len(segs) == 0:
		return opt, errors.New("no master name: want redis+sentinel://host:port,host:port/master")
	case sentinel:
		master = segs[0]
		if len(segs) > 2 {
			return opt, errors.New("path: want /master or /master/db")
		}
		if len(segs) == 2 {
			one += "/" + segs[1]
		}
	case len(segs) > 0:
		return opt, errors.New("a Redis Cluster has no database number: no path")
	}
	if query != "" {
		one += "?" + query
	}
	parsed, err := rueidis.ParseURL(one)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return opt, err
	}
	if len(parsed.InitAddress) != 1 || parsed.Sentinel.MasterSet != "" {
		return opt, errors.New("addr= and master_set= are not taken: list the servers before the path")
	}
	parsed.InitAddress = opt.InitAddress
	if sentinel {
		parsed.Sentinel.MasterSet = master
		parsed.Sentinel.TLSConfig = parsed.TLSConfig
		parsed.Sentinel.Dialer = parsed.Dialer
	}
	return parsed, nil
}

// Redacted returns raw fit for a log line: each password replaced by "xxxxx".
func Redacted(raw string) string {
	var out []string
	for _, p := range strings.Split(raw, ",") {
		if scheme, rest, ok := strings.Cut(p, "://"); ok {
			if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
				user, _, hasPassword := strings.Cut(rest[:at], ":")
				if hasPassword {
					user += ":xxxxx"
				}
				p = scheme + "://" + user + "@" + rest[at+1:]
			}
		}
		out = append(out, p)
	}
	return strings.Join(out, ",")
}
