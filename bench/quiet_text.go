package bench

import (
	"fmt"
	"io"
)

// writeText writes the idle phase of a fanout run.
func (ph *IdlePhase) writeText(b io.Writer) {
	if s := ph.ServerRSS; s != nil {
		settled := fmt.Sprintf("settled in %.1f s", s.SettleSeconds)
		if !s.Settled {
			settled = fmt.Sprintf("still moving after %.1f s", s.SettleSeconds)
		}
		fmt.Fprintf(b, "  server RSS   baseline %s, after %s (%s)%s: %.0f B = %.2f KiB per connection\n",
			mib(s.BaselineBytes), mib(s.AfterBytes), settled, totalNote(len(s.Nodes)), s.PerConnBytes, s.PerConnKiB)
		if len(s.Nodes) > 0 {
			lo, hi := s.Nodes[0].PerConnBytes, s.Nodes[0].PerConnBytes
			for _, n := range s.Nodes {
				lo, hi = min(lo, n.PerConnBytes), max(hi, n.PerConnBytes)
			}
			fmt.Fprintf(b, "  per node     %d nodes: %.0f to %.0f B per connection\n", len(s.Nodes), lo, hi)
		}
	}
	if k := ph.Kernel; k != nil {
		fmt.Fprintf(b, "  kernel       TCP sockets %d -> %d (+%d); socket buffers %d -> %d pages; Slab %s -> %s, SUnreclaim %s -> %s\n",
			k.Before.TCPInuse, k.After.TCPInuse, k.Sockets, k.Before.TCPMemPages, k.After.TCPMemPages,
			mib(k.Before.SlabKB<<10), mib(k.After.SlabKB<<10), mib(k.Before.SUnreclaim<<10), mib(k.After.SUnreclaim<<10))
		fmt.Fprintf(b, "  per socket   %.0f B socket buffers, %.0f B slab (%.0f B unreclaimable); MemAvailable fell %.0f B per connection (both ends, all processes)\n",
			k.BuffersPerSocket, k.SlabPerSocket, k.SUnreclaimPerSock, k.AvailablePerConn)
	}
	g := ph.Generator
	fmt.Fprintf(b, "  generator    RSS %s with every connection open, %.0f B per connection%s\n", mib(g.RSSBytes), g.RSSPerConnBytes, procsNote(g.Procs))
	for _, w := range ph.Windows {
		act := "never ping first"
		if w.ClientActivitySeconds > 0 {
			act = fmt.Sprintf("activity timeout %gs", w.ClientActivitySeconds)
		}
		fmt.Fprintf(b, "  idle %4.0f s  clients' %s: %d pings sent, %d server pings answered, %d unanswered\n",
			w.Seconds, act, w.Pings.Sent, w.Pings.Answered, w.Pings.Unanswered)
		if u := w.Server; u != nil {
			fmt.Fprintf(b, "               CPU per connection per second: nodes %.3f µs, bus %.3f µs, generator %.3f µs (nodes+bus %.2f s over the window; nodes %.1f µs per ping exchange)\n",
				w.NodesMicrosPerConnSec, w.BusMicrosPerConnSec, w.GeneratorMicrosPerConnSec, u.CPUSeconds, w.NodesMicrosPerPing)
		}
	}
}
