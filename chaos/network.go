//go:build linux

package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// network is where the run's processes listen and how they reach one another.
//
// Isolated (network namespaces), each herald node i (from 1) runs in a namespace of its own,
// and the bus servers (and Kafka) in one more, on the address 10.X.0.1 (X picked free at
// start). Node i reaches the bus through a veth pair (10.X.i.2 to 10.X.i.1, a route to the
// bus address through it) and is reached by the harness, in the namespace it was started in,
// through another (10.X.(100+i).1 to 10.X.(100+i).2); the harness reaches the bus through a
// third (10.X.250.1 to 10.X.250.2). A partition sets the far end of one of node i's pairs
// down (the bus's end, or the node's end of the clients' pair), so that packets are dropped
// silently, as a cut cable drops them, and nothing needs to be set up again when it comes
// back up.
//
// Not isolated (no CAP_NET_ADMIN, or asked), every process listens on 127.0.0.1 and there
// are no partitions.
type network struct {
	isolated bool
	refused  string // why there are no namespaces, when they were wanted
	log      *slog.Logger
	ip       string // the ip command
	ns       string // namespaces' name prefix: hchaos-<pid>
	ifc      string // links' name prefix: hc<pid in hex>
	x        int    // the second byte of 10.X.0.0/16
	nodes    int
	made     []string // namespaces made, in order
	links    []string // links made in the harness's namespace
}

// nsPrefix starts the name of every namespace the harness makes, before its pid.
const nsPrefix = "hchaos-"

// newNetwork makes the namespaces and links of nodes herald nodes and the bus, or returns a
// loopback network when loopback is asked or the kernel refuses (with the reason logged).
func newNetwork(log *slog.Logger, nodes int, loopback bool) *network {
	n := &network{log: log, nodes: nodes}
	if loopback {
		log.Info("network: loopback only, as asked: no partitions")
		return n
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		n.refused = "no ip command (iproute2): loopback only, partition faults skipped"
		log.Warn("network: " + n.refused)
		return n
	}
	n.ip = ip
	removeStale(log, ip)
	pid := os.Getpid()
	n.ns = nsPrefix + strconv.Itoa(pid)
	n.ifc = "hc" + strconv.FormatInt(int64(pid), 16)
	n.x = freeOctet(ip)
	if err := n.build(); err != nil {
		n.remove()
		refused := fmt.Sprintf("network namespaces refused (%v): loopback only, partition faults skipped", err)
		log.Warn("network: " + refused)
		return &network{log: log, nodes: nodes, refused: refused}
	}
	n.isolated = true
	log.Info("network: a namespace per node and one for the bus", "prefix", n.ns, "subnet", fmt.Sprintf("10.%d.0.0/16", n.x))
	return n
}

// build makes the namespaces and links.
func (n *network) build() error {
	bus := n.busNS()
	if err := n.addNS(bus); err != nil {
		return err
	}
	steps := [][]string{
		{"-n", bus, "link", "set", "lo", "up"},
		{"-n", bus, "addr", "add", n.addr(0, 1) + "/32", "dev", "lo"},
	}
	if err := n.run(steps...); err != nil {
		return err
	}
	// The harness's link to the bus.
	if err := n.pair("", n.ifc+"ctl", n.addr(250, 1), bus, n.ifc+"ctb", n.addr(250, 2)); err != nil {
		return err
	}
	if err := n.run([]string{"route", "add", n.addr(0, 1) + "/32", "via", n.addr(250, 2)}); err != nil {
		return err
	}
	for i := 1; i <= n.nodes; i++ {
		ns := n.nodeNS(i)
		if err := n.addNS(ns); err != nil {
			return err
		}
		if err := n.run([]string{"-n", ns, "link", "set", "lo", "up"}); err != nil {
			return err
		}
		if err := n.pair(ns, n.busLink(i), n.addr(i, 2), bus, n.busEnd(i), n.addr(i, 1)); err != nil {
			return err
		}
		if err := n.run([]string{"-n", ns, "route", "add", n.addr(0, 1) + "/32", "via", n.addr(i, 1)}); err != nil {
			return err
		}
		if err := n.pair("", n.clientEnd(i), n.addr(100+i, 1), ns, n.clientLink(i), n.addr(100+i, 2)); err != nil {
			return err
		}
	}
	return nil
}

func (n *network) addr(c, d int) string { return fmt.Sprintf("10.%d.%d.%d", n.x, c, d) }

func (n *network) busNS() string       { return n.ns + "-bus" }
func (n *network) nodeNS(i int) string { return n.ns + "-n" + strconv.Itoa(i) }

// The links' names: node i's end of its bus pair and the bus's end, the harness's end of its
// clients' pair and the node's end.
func (n *network) busLink(i int) string    { return n.ifc + "n" + strconv.Itoa(i) + "b" }
func (n *network) busEnd(i int) string     { return n.ifc + "n" + strconv.Itoa(i) + "x" }
func (n *network) clientEnd(i int) string  { return n.ifc + "n" + strconv.Itoa(i) + "h" }
func (n *network) clientLink(i int) string { return n.ifc + "n" + strconv.Itoa(i) + "c" }

// busHost is the address the bus servers listen on.
func (n *network) busHost() string {
	if !n.isolated {
		return "127.0.0.1"
	}
	return n.addr(0, 1)
}

// nodeHost is the address clients reach node i at; listenHost the one it listens on.
func (n *network) nodeHost(i int) string {
	if !n.isolated {
		return "127.0.0.1"
	}
	return n.addr(100+i, 2)
}

func (n *network) listenHost() string {
	if !n.isolated {
		return "127.0.0.1"
	}
	return "0.0.0.0" // the namespace's own interfaces only
}

// inBus and inNode return argv run in the bus's namespace, or node i's.
func (n *network) inBus(argv []string) []string         { return n.exec(n.busNS(), argv) }
func (n *network) inNode(i int, argv []string) []string { return n.exec(n.nodeNS(i), argv) }

func (n *network) exec(ns string, argv []string) []string {
	if !n.isolated {
		return argv
	}
	// ip netns exec execs the command in place: the pid the harness holds is the command's.
	return append([]string{n.ip, "netns", "exec", ns}, argv...)
}

// setLink sets node i's link to the bus (bus true) or to its clients down or up.
func (n *network) setLink(i int, bus, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	if bus {
		return n.run([]string{"-n", n.busNS(), "link", "set", n.busEnd(i), state})
	}
	return n.run([]string{"-n", n.nodeNS(i), "link", "set", n.clientLink(i), state})
}

// addNS makes a namespace and notes it for remove.
func (n *network) addNS(name string) error {
	if err := n.run([]string{"netns", "add", name}); err != nil {
		return err
	}
	n.made = append(n.made, name)
	return nil
}

// pair makes a veth pair with one end (a, address aAddr/30) in namespace nsA and the other
// in nsB ("" is the harness's namespace), both up.
func (n *network) pair(nsA, a, aAddr, nsB, b, bAddr string) error {
	if err := n.run([]string{"link", "add", a, "type", "veth", "peer", "name", b}); err != nil {
		return err
	}
	n.links = append(n.links, a)
	for _, end := range []struct{ ns, name, addr string }{{nsA, a, aAddr}, {nsB, b, bAddr}} {
		var on []string
		if end.ns != "" {
			if err := n.run([]string{"link", "set", end.name, "netns", end.ns}); err != nil {
				return err
			}
			on = []string{"-n", end.ns}
		}
		if err := n.run(append(on, "addr", "add", end.addr+"/30", "dev", end.name),
			append(on, "link", "set", end.name, "up")); err != nil {
			return err
		}
	}
	return nil
}

// run runs ip with each argument list in turn, stopping at the first failure.
func (n *network) run(steps ...[]string) error {
	for _, args := range steps {
		out, err := exec.Command(n.ip, args...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// remove deletes the namespaces and links made, once every process in them has exited.
func (n *network) remove() {
	if n.ip == "" {
		return
	}
	for _, l := range n.links {
		// A pair goes with either end; the end in a namespace already deleted is gone.
		_ = exec.Command(n.ip, "link", "del", l).Run()
	}
	for i := len(n.made) - 1; i >= 0; i-- {
		if err := n.run([]string{"netns", "del", n.made[i]}); err != nil {
			n.log.Warn("network: removing a namespace", "err", err)
		}
	}
	n.made, n.links = nil, nil
}

// removeStale deletes the namespaces that a harness no longer running left behind (killed
// before it could remove them): the pid in their names is not a live process.
func removeStale(log *slog.Logger, ip string) {
	out, err := exec.Command(ip, "netns", "list").Output()
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, nsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			continue // that harness is still running (or the pid is someone else's now)
		}
		if err := exec.Command(ip, "netns", "del", name).Run(); err == nil {
			log.Info("network: removed a namespace a stopped harness left", "namespace", name)
		}
	}
}

// freeOctet picks X so that nothing on the machine uses 10.X.0.0/16 yet.
func freeOctet(ip string) int {
	out, _ := exec.Command(ip, "-4", "route", "show", "table", "all").Output()
	addrs, _ := exec.Command(ip, "-4", "addr").Output()
	used := string(out) + string(addrs)
	for range 200 {
		x := 64 + rand.IntN(180)
		if !strings.Contains(used, fmt.Sprintf("10.%d.", x)) {
			return x
		}
	}
	return 64 + rand.IntN(180)
}
