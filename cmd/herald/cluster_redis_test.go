package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/herald-rt/herald/internal/busurl"
)

// TestParseRedisTopologies: cluster.url's Redis forms past one server, their hosts,
// redaction and secrets.
func TestParseRedisTopologies(t *testing.T) {
	for _, c := range []struct {
		raw, redacted string
		hosts         []string
		secrets       []string
	}{
		{"redis://a:6379,redis://:pw@b:6379/2", "redis://a:6379,redis://:xxxxx@b:6379/2", []string{"a", "b"}, []string{"pw"}},
		{"redis+cluster://127.0.0.1:7000,127.0.0.1:7001", "redis+cluster://127.0.0.1:7000,127.0.0.1:7001", []string{"127.0.0.1", "127.0.0.1"}, nil},
		{"rediss+cluster://u:s3cret@r1:7000,r2:7000", "rediss+cluster://u:xxxxx@r1:7000,r2:7000", []string{"r1", "r2"}, []string{"s3cret"}},
		{"redis+sentinel://:p%40ss@s1:26379,s2:26379,s3:26379/mymaster/1", "redis+sentinel://:xxxxx@s1:26379,s2:26379,s3:26379/mymaster/1",
			[]string{"s1", "s2", "s3"}, []string{"p%40ss", "p@ss"}},
	} {
		u, err := busurl.Parse(c.raw)
		if err != nil {
			t.Errorf("%s: %v", c.raw, err)
			continue
		}
		if u.Engine != "redis" || u.Redacted != c.redacted || !slices.Equal(u.Hosts, c.hosts) {
			t.Errorf("%s: engine %q, redacted %q, hosts %q; want redis, %q, %q", c.raw, u.Engine, u.Redacted, u.Hosts, c.redacted, c.hosts)
		}
		for _, s := range c.secrets {
			if !slices.Contains(u.Secrets, s) {
				t.Errorf("%s: secrets %q lack %q", c.raw, u.Secrets, s)
			}
		}
	}
}

// TestRedisTopologyErrors: what cluster.url refuses past one server, said without the
// password.
func TestRedisTopologyErrors(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"redis://:s3cret@a:6379,redis://:s3cret@A:6379", "servers 1 and 2 are the same shard (a:6379)"},
		{"redis://a:6379/1,redis://a:6379/1", "the same shard"},
		{"redis://a:6379,nats://b:4222", "server 2: "},
		{"redis+cluster://:s3cret@a:7000,a:7000", "listed twice"},
		{"redis+cluster://a:7000/0", "no database number"},
		{"redis+cluster://a", "want host:port"},
		{"redis+sentinel://:s3cret@s1:26379,s2:26379", "no master name"},
		{"redis+sentinel://s1:26379/m/0/1", "want /master or /master/db"},
		{"redis://a:6379?master_set=m", "use redis+cluster:// or redis+sentinel://"},
	} {
		_, err := load(t, []string{"--cluster-url", c.raw}, nil)
		if err == nil {
			t.Errorf("%s: accepted", c.raw)
			continue
		}
		if !strings.Contains(err.Error(), "cluster.url: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q; want cluster.url: ...%s", c.raw, err, c.want)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: error shows the password: %v", c.raw, err)
		}
	}
}
