package bench

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// WriteText writes the report as a readable block.
func (r *IdleReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "idle: %d connections over %d channels %s\n", r.Conns, r.Channels, r.Server.on())
	writeSetup(b, r.Setup)
	if s := r.ServerRSS; s != nil {
		settled := fmt.Sprintf("settled in %.1f s", s.SettleSeconds)
		if !s.Settled {
			settled = fmt.Sprintf("still moving after %.1f s", s.SettleSeconds)
		}
		fmt.Fprintf(b, "  server RSS   baseline %s, after %s (%s)%s\n", mib(s.BaselineBytes), mib(s.AfterBytes), settled, totalNote(len(s.Nodes)))
		fmt.Fprintf(b, "  per conn     %.0f B = %.2f KiB user-space RSS per connection\n", s.PerConnBytes, s.PerConnKiB)
		writeNodesRSS(b, s.Nodes)
	} else {
		fmt.Fprintf(b, "  server RSS   not measured (no --server-pid)\n")
	}
	if r.HoldSeconds > 0 {
		fmt.Fprintf(b, "  hold         %.1f s\n", r.HoldSeconds)
	}
	writeLost(b, r.Lost, "connections")
	fmt.Fprintf(b, "  close        %d closed in %.2f s\n", r.Setup.Established, r.CloseSeconds)
	g := r.Generator
	fmt.Fprintf(b, "  generator    CPU %.2f s; RSS %s with every connection open, %.0f B per connection%s\n",
		g.CPUSeconds, mib(g.RSSBytes), g.RSSPerConnBytes, procsNote(g.Procs))
	return b.Flush()
}

// WriteText writes the report as a readable block.
func (r *FanoutReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "fanout: %d subscribers on %q, %d events %gs apart, %d-byte data, %s\n",
		r.Subs, r.Channel, r.Events, r.IntervalSeconds, r.PayloadBytes, r.Server.on())
	writeSetup(b, r.Setup)
	if r.Idle != nil {
		r.Idle.writeText(b)
	}
	writeDelivery(b, r.Delivery)
	writeLost(b, r.Lost, "subscribers")
	if r.Reconnect != nil {
		r.Reconnect.writeText(b)
	}
	fmt.Fprintf(b, "  latency ms   %8s %7s %7s %7s %7s %7s %7s  %s\n", "count", "min", "p50", "p95", "p99", "p99.9", "max", "publish")
	writeLatency(b, "all", r.Latency, "")
	for _, e := range r.PerEvent {
		writeLatency(b, "event "+strconv.Itoa(e.Seq), e.Latency, fmt.Sprintf("%7.1f", e.PublishMs))
	}
	writeUsage(b, r.ServerUsage, r.Generator)
	return b.Flush()
}

// writeDelivery writes the exact delivery counts.
func writeDelivery(b io.Writer, d Delivery) {
	fmt.Fprintf(b, "  delivery     %d of %d (%.2f%%): missing %d, duplicated %d, out of order %d",
		d.Delivered, d.Expected, d.Percent, d.Missing, d.Duplicated, d.OutOfOrder)
	if d.Unexpected > 0 {
		fmt.Fprintf(b, ", unexpected seq %d", d.Unexpected)
	}
	if d.Complete {
		fmt.Fprintf(b, "; all in %.3f s after the last publish\n", d.WaitSeconds)
	} else {
		fmt.Fprintf(b, "; incomplete after waiting %.1f s\n", d.WaitSeconds)
	}
}

// writeUsage writes the server's and the generator's CPU over the publish window.
func writeUsage(b io.Writer, server *Usage, gen Usage) {
	if u := server; u != nil {
		fmt.Fprintf(b, "  server CPU   %.2f s from first publish to end of delivery = %.1f us per delivery; RSS %s%s\n",
			u.CPUSeconds, u.CPUPerDeliveryMicros, mib(u.RSSBytes), u.summedNote())
		if u.WriteCalls > 0 {
			fmt.Fprintf(b, "               %d write calls = %.2f deliveries per write\n", u.WriteCalls, u.DeliveriesPerWrite)
		}
		writeProcs(b, u)
	} else {
		fmt.Fprintf(b, "  server CPU   not measured (no --server-pid)\n")
	}
	fmt.Fprintf(b, "  generator    CPU %.2f s over the same window = %.1f us per delivery; RSS %s%s\n",
		gen.CPUSeconds, gen.CPUPerDeliveryMicros, mib(gen.RSSBytes), procsNote(gen.Procs))
}

func procsNote(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" (%d processes)", n)
}

func writeSetup(b io.Writer, s Setup) {
	fmt.Fprintf(b, "  setup        %d established, %d failed in %.2f s (%.0f conn/s)\n", s.Established, s.Failed, s.Seconds, s.RatePerSec)
	if len(s.PerNode) > 1 {
		counts := make([]string, len(s.PerNode))
		for k, n := range s.PerNode {
			counts[k] = strconv.Itoa(n)
		}
		fmt.Fprintf(b, "               per node, in --ws order: %s\n", strings.Join(counts, ", "))
	}
	if s.FirstError != "" {
		fmt.Fprintf(b, "               first failure: %s\n", s.FirstError)
	}
}

// summedNote marks the server's figures summed over several processes: its nodes' and, for
// CPU, the bus servers'.
func (u *Usage) summedNote() string {
	s := totalNote(len(u.Nodes))
	if len(u.Bus) > 0 {
		s += "; CPU with the bus server's"
	}
	return s
}

// writeProcs writes the server's figures per node and per bus server.
func writeProcs(b io.Writer, u *Usage) {
	for _, n := range u.Nodes {
		fmt.Fprintf(b, "    node       %s (pid %d): CPU %.2f s; RSS %s\n", n.WS, n.PID, n.CPUSeconds, mib(n.RSSBytes))
	}
	for _, n := range u.Bus {
		fmt.Fprintf(b, "    bus        pid %d: CPU %.2f s; RSS %s\n", n.PID, n.CPUSeconds, mib(n.RSSBytes))
	}
}

// totalNote marks a figure summed over n nodes' processes.
func totalNote(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(", summed over %d nodes", n)
}

// writeNodesRSS writes each node's RSS and its growth per connection on the node.
func writeNodesRSS(b io.Writer, nodes []NodeRSS) {
	for _, n := range nodes {
		fmt.Fprintf(b, "    node       %s (pid %d): baseline %s, after %s; %d connections, %.0f B = %.2f KiB per connection\n",
			n.WS, n.PID, mib(n.BaselineBytes), mib(n.AfterBytes), n.Connections, n.PerConnBytes, n.PerConnKiB)
	}
}

func writeLost(b io.Writer, l Lost, what string) {
	fmt.Fprintf(b, "  lost         %d %s dropped by the server", l.Count, what)
	if len(l.ByCode) > 0 {
		codes := slices.Sorted(maps.Keys(l.ByCode))
		parts := make([]string, len(codes))
		for i, c := range codes {
			parts[i] = fmt.Sprintf("%d× code %d", l.ByCode[c], c)
			if c == 0 {
				parts[i] = fmt.Sprintf("%d× no close frame", l.ByCode[c])
			}
		}
		fmt.Fprintf(b, ": %s", strings.Join(parts, ", "))
	}
	if l.FirstError != "" {
		fmt.Fprintf(b, " (first: %s)", l.FirstError)
	}
	fmt.Fprintln(b)
	for _, s := range l.Seen {
		fmt.Fprintf(b, "    code %d at %s: last message %s before, server ping %s before, last write %s before, %d bytes unsent\n",
			s.Code, time.UnixMilli(s.EndMs).UTC().Format("15:04:05.000"), agoText(s.RxAgo), agoText(s.PingAgo), agoText(s.TxAgo), s.Unsent)
	}
}

// agoText is an age in ms as seconds, or "none" for -1.
func agoText(ms int64) string {
	if ms < 0 {
		return "none"
	}
	return fmt.Sprintf("%.1f s", float64(ms)/1000)
}

func writeLatency(b io.Writer, name string, l Latency, extra string) {
	fmt.Fprintf(b, "  %-12s %8d %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f  %s\n", name, l.Count, l.MinMs, l.P50Ms, l.P95Ms, l.P99Ms, l.P999Ms, l.MaxMs, extra)
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
