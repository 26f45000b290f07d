package bench

import (
	"bufio"
	"fmt"
	"io"
)

// WriteText writes the report as a readable block.
func (r *RecoverReport) WriteText(w io.Writer) error {
	b := bufio.NewWriter(w)
	on := fmt.Sprintf("%q", r.Channel)
	if r.Channels > 1 {
		on = fmt.Sprintf("%d channels %s-0 ...", r.Channels, r.Channel)
	}
	fmt.Fprintf(b, "recover: %d clients on %s, %d events before, a %gs outage with %d events, %d after, %d-byte data, %s\n",
		r.Clients, on, r.Before, r.OutageSeconds, r.Events, r.After, r.PayloadBytes, r.Server.on())
	writeSetup(b, r.Setup)
	fmt.Fprintf(b, "  positioned   %d of %d knew their position after subscribing\n", r.Positioned, r.Setup.Established)
	if k := r.Kill; k != nil {
		fmt.Fprintf(b, "  kill         node %d killed: its %d clients saw their connections end within %.3f s; %d clients of the other nodes stayed\n",
			k.Node, k.Clients, k.GoneSeconds, r.Stayed)
		fmt.Fprintf(b, "  outage       %d events published to each channel (%d failed) in %.2f s\n", r.Outage.Published, r.Outage.Failed, r.Outage.Seconds)
	} else {
		fmt.Fprintf(b, "  outage       every connection dropped; %d events published to each channel (%d failed) in %.2f s\n",
			r.Outage.Published, r.Outage.Failed, r.Outage.Seconds)
	}
	where := ""
	if r.SwitchNodes {
		where = ", each to the next node"
	}
	if r.Kill != nil {
		where = fmt.Sprintf(", round robin over the live nodes %v", r.Reconnect.PerNode)
	}
	fmt.Fprintf(b, "  reconnect    %d established, %d failed in %.2f s (%.0f conn/s)%s\n",
		r.Reconnect.Established, r.Reconnect.Failed, r.Reconnect.Seconds, r.Reconnect.RatePerSec, where)
	if r.Reconnect.FirstError != "" {
		fmt.Fprintf(b, "               first failure: %s\n", r.Reconnect.FirstError)
	}
	if r.LiveIntervalSeconds > 0 {
		fmt.Fprintf(b, "  live         %d events published to each channel every %gs while reconnecting\n", r.LivePublished, r.LiveIntervalSeconds)
	}
	rc := r.Recovery
	fmt.Fprintf(b, "  recovered    %d of %d, %d failed; %d events replayed; %d position errors, %d outage events after a recovery\n",
		rc.Recovered, r.Clients-r.Stayed, rc.Failed, rc.Replayed, rc.PositionErrors, rc.LateEvents)
	for _, reason := range rc.reasons() {
		fmt.Fprintf(b, "    failed     %d× %s\n", rc.ByReason[reason], reason)
	}
	switch {
	case rc.AllSeconds > 0 && r.Kill != nil:
		fmt.Fprintf(b, "  all back     in %.3f s from the start of the reconnect, %.3f s from the kill\n", rc.AllSeconds, r.Kill.AllSeconds)
	case rc.AllSeconds > 0:
		fmt.Fprintf(b, "  all back     in %.3f s from the start of the reconnect\n", rc.AllSeconds)
	case rc.Complete:
		fmt.Fprintf(b, "  all back     NO: every client settled in %.3f s, not every one recovered\n", rc.SettledSeconds)
	default:
		fmt.Fprintf(b, "  all back     NO: not every client settled after waiting %.1f s\n", rc.SettledSeconds)
	}
	writeDelivery(b, r.Delivery)
	writeLost(b, r.Lost, "connections")
	fmt.Fprintf(b, "  latency ms   %8s %7s %7s %7s %7s %7s %7s\n", "count", "min", "p50", "p95", "p99", "p99.9", "max")
	writeLatency(b, "reconnect", r.Latency, "its dial → its recovery frame")
	writeLatency(b, "from start", r.LatencyFromStart, "the reconnect's start → its recovery frame")
	if u := r.ServerUsage; u != nil {
		fmt.Fprintf(b, "  server CPU   %.2f s from the reconnect until every client settled = %.1f us per replayed event; RSS %s%s\n",
			u.CPUSeconds, u.CPUPerDeliveryMicros, mib(u.RSSBytes), u.summedNote())
		writeProcs(b, u)
	} else {
		fmt.Fprintf(b, "  server CPU   not measured (no --server-pid)\n")
	}
	g := r.Generator
	fmt.Fprintf(b, "  generator    CPU %.2f s over the same window = %.1f us per replayed event; RSS %s\n", g.CPUSeconds, g.CPUPerDeliveryMicros, mib(g.RSSBytes))
	return b.Flush()
}
