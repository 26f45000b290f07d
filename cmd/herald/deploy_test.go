package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/herald-rt/herald/config"
	"github.com/herald-rt/herald/internal/runtimechecks"
	"gopkg.in/yaml.v3"
)

// No container runtime runs the files of deploy/ here, so these tests check what can be
// checked without one: the Compose files parse, and each herald node's environment (the
// Dockerfile's ENV, then the service's) is a configuration `herald serve` accepts, naming only
// variables herald reads, with the bus and node id the file means; the load balancer's
// config names every node on the port it listens on and checks /ready.

// composeFile is the part of a Compose file these tests read.
type composeFile struct {
	Name     string `yaml:"name"`
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       map[string]string `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   []string          `yaml:"depends_on"`
	} `yaml:"services"`
}

// composeDefault matches Compose's ${VAR:-default}, which the tests read as its default.
var composeDefault = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)

// composeRequired matches Compose's ${VAR:?error}: Compose refuses to start without VAR and
// says error. The tests give it composeGiven's value.
var composeRequired = regexp.MustCompile(`\$\{([A-Z_]+):\?([^}]*)\}`)

// composeGiven is what the tests give a variable the Compose files require, as an operator
// would: the cluster secret.
var composeGiven = map[string]string{"HERALD_CLUSTER_SECRET": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}

// dockerfileEnv returns the variables deploy/Dockerfile's ENV instructions set.
func dockerfileEnv(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "ENV ")
		if !ok {
			continue
		}
		for _, kv := range strings.Fields(rest) {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("Dockerfile: ENV %q: want KEY=value pairs", rest)
			}
			env[k] = v
		}
	}
	if len(env) == 0 {
		t.Fatal("Dockerfile: no ENV found")
	}
	return env
}

// knownEnv is every environment variable herald serve reads.
func knownEnv() map[string]bool {
	known := map[string]bool{}
	for _, v := range config.EnvVars() {
		known[v] = true
	}
	return known
}

func TestComposeFiles(t *testing.T) {
	image := dockerfileEnv(t)
	known := knownEnv()
	lb, err := os.ReadFile("../../deploy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for file, scheme := range map[string]string{"docker-compose.yml": "nats", "docker-compose.redis.yml": "redis"} {
		t.Run(file, func(t *testing.T) {
			b, err := os.ReadFile("../../deploy/" + file)
			if err != nil {
				t.Fatal(err)
			}
			var c composeFile
			if err := yaml.Unmarshal(b, &c); err != nil {
				t.Fatalf("%s does not parse: %v", file, err)
			}
			if _, ok := c.Services[scheme]; !ok {
				t.Errorf("%s: no %s service for the bus", file, scheme)
			}
			var nodes []string
			ids := map[string]bool{}
			for name, s := range c.Services {
				if !strings.HasPrefix(name, "herald-") {
					continue
				}
				nodes = append(nodes, name)
				if s.Build["dockerfile"] != "deploy/Dockerfile" || s.Build["context"] != ".." {
					t.Errorf("%s: %s builds %v; want deploy/Dockerfile from the repository's root", file, name, s.Build)
				}
				if !slices.Contains(s.DependsOn, scheme) {
					t.Errorf("%s: %s depends on %v; want the bus, %s", file, name, s.DependsOn, scheme)
				}
				env := map[string]string{}
				for k, v := range image {
					env[k] = v
				}
				for k, v := range s.Environment {
					if !known[k] {
						t.Errorf("%s: %s sets %s, which herald does not read", file, name, k)
					}
					if m := composeRequired.FindStringSubmatch(v); m != nil {
						if composeGiven[m[1]] == "" || !strings.Contains(m[2], "openssl rand -hex 32") {
							t.Errorf("%s: %s requires %s (%q): want a value the tests know and how to make one", file, name, m[1], m[2])
						}
						v = composeGiven[m[1]]
					}
					env[k] = composeDefault.ReplaceAllString(v, "$1")
				}
				if !composeRequired.MatchString(s.Environment["HERALD_CLUSTER_SECRET"]) {
					t.Errorf("%s: %s: HERALD_CLUSTER_SECRET %q; want it required from the operator (${HERALD_CLUSTER_SECRET:?...})", file, name, s.Environment["HERALD_CLUSTER_SECRET"])
				}
				cfg, err := config.Load(nil, func(k string) string { return env[k] }, runtimechecks.Checks())
				if err != nil {
					t.Errorf("%s: %s: herald serve refuses its environment: %v", file, name, err)
					continue
				}
				if cfg.ConnectionRatePerIP != 0 || cfg.History.ReplayBytesPerSecondPerAddress != 0 {
					t.Errorf("%s: %s: per-address limits %d connections/s, %d replayed bytes/s; behind HAProxy, which hides client addresses, want 0",
						file, name, cfg.ConnectionRatePerIP, cfg.History.ReplayBytesPerSecondPerAddress)
				}
				if !strings.HasPrefix(cfg.Cluster.URL, scheme+"://"+scheme+":") {
					t.Errorf("%s: %s: cluster.url %q; want the %s service", file, name, cfg.Cluster.URL, scheme)
				}
				if cfg.Cluster.NodeID != name || ids[cfg.Cluster.NodeID] {
					t.Errorf("%s: %s: node id %q; want its service name, unique", file, name, cfg.Cluster.NodeID)
				}
				ids[cfg.Cluster.NodeID] = true
				if cfg.Host != "0.0.0.0" || cfg.Metrics.Host != "0.0.0.0" {
					t.Errorf("%s: %s listens on %s, metrics on %s; want every interface in a container", file, name, cfg.Host, cfg.Metrics.Host)
				}
				if len(s.Ports) != 1 || !strings.HasSuffix(s.Ports[0], fmt.Sprintf(":%d", cfg.Metrics.Port)) {
					t.Errorf("%s: %s publishes %v; want its metrics port %d", file, name, s.Ports, cfg.Metrics.Port)
				}
				if want := fmt.Sprintf("server %s %s:%d", name, name, cfg.Port); !strings.Contains(string(lb), want) {
					t.Errorf("haproxy.cfg lacks %q", want)
				}
			}
			if len(nodes) != 3 {
				t.Errorf("%s: herald nodes %v; want 3", file, nodes)
			}
			lbs, ok := c.Services["lb"]
			if !ok || !slices.Contains(lbs.Volumes, "./haproxy.cfg:/usr/local/etc/haproxy/haproxy.cfg:ro") {
				t.Errorf("%s: the lb service %+v does not mount deploy/haproxy.cfg", file, lbs)
			}
		})
	}
	for _, want := range []string{"option httpchk GET /ready", "http-check expect status 200", "timeout tunnel"} {
		if !strings.Contains(string(lb), want) {
			t.Errorf("haproxy.cfg lacks %q", want)
		}
	}
}
