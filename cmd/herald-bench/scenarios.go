package main

import (
	"context"
	"flag"
	"io"
	"os"
	"strings"
	"time"

	"github.com/herald-rt/herald/bench"
)

// benchScenario defines a scenario's own flags on fs and returns its run, which reads them
// once they are parsed.
type benchScenario func(fs *flag.FlagSet) benchRunner

// benchRunner runs a scenario against t. It returns the report, whether the run was clean
// (nothing failed, lost or duplicated), and why it could not run.
type benchRunner func(ctx context.Context, t bench.Target) (benchReport, bool, error)

// benchReport is a scenario's report.
type benchReport interface{ WriteText(io.Writer) error }

// benchScenarios are the scenarios by name (see benchUsage).
var benchScenarios = map[string]benchScenario{
	"idle": idleScenario, "fanout": fanoutScenario, "multichannel": multichannelScenario, "ramp": rampScenario,
	"churn": churnScenario, "publish": publishScenario, "presence": presenceScenario, "channels": channelsScenario,
	"recover": recoverScenario,
}

func idleScenario(fs *flag.FlagSet) benchRunner {
	cfg := bench.IdleConfig{}
	fs.IntVar(&cfg.Conns, "conns", 1000, "connections")
	fs.IntVar(&cfg.Channels, "channels", 10, "public channels the connections are spread over")
	fs.DurationVar(&cfg.Hold, "hold", 0, "keep the connections open this long after measuring")
	return func(ctx context.Context, t bench.Target) (benchReport, bool, error) {
		cfg.Target = t
		rep, err := bench.Idle(ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		return rep, rep.Setup.Failed == 0 && rep.Lost.Count == 0, nil
	}
}

func fanoutScenario(fs *flag.FlagSet) benchRunner {
	cfg := bench.FanoutConfig{}
	fs.IntVar(&cfg.Subs, "subs", 1000, "subscribers on the channel")
	fs.IntVar(&cfg.Events, "events", 5, "events to publish")
	fs.DurationVar(&cfg.Interval, "interval", 3*time.Second, "time between publishes")
	fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
	fs.StringVar(&cfg.Channel, "channel", "fanout", "channel name")
	fs.DurationVar(&cfg.Wait, "wait", 5*time.Second, "after the last publish, how long to wait for every delivery")
	fs.DurationVar(&cfg.Idle, "idle", 0, "a quiet window before the first publish: server RSS per connection and kernel memory per socket once it settles, then the nodes' CPU per idle connection over this long, the clients pinging as pusher-js does (0: none)")
	fs.DurationVar(&cfg.IdleFast, "idle-fast", 0, "a second quiet window after --idle, the clients' own activity timeout at --idle-fast-activity (0: none)")
	fs.DurationVar(&cfg.IdleFastActivity, "idle-fast-activity", 10*time.Second, "the clients' own activity timeout during --idle-fast")
	fs.BoolVar(&cfg.Reconnect, "reconnect", false, "bring back the subscribers the server closes, as pusher-js does (at once after a close code 4200-4299, a second later after 4100-4199 or a close without a close frame), each resubscribing with recover from the position of its last event when the channel keeps history, and try a failed first connection again a second later; reports how they came back, and a subscriber that came back is not a failure of the run")
	return func(ctx context.Context, t bench.Target) (benchReport, bool, error) {
		cfg.Target = t
		rep, err := bench.Fanout(ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		return rep, rep.Clean(), nil
	}
}

func multichannelScenario(fs *flag.FlagSet) benchRunner {
	cfg := bench.MultichannelConfig{}
	fs.IntVar(&cfg.Subs, "subs", 19000, "subscribers in all, spread round robin over the channels")
	fs.IntVar(&cfg.Channels, "channels", 40, "channels")
	fs.IntVar(&cfg.Burst, "burst", 10, "events published to every channel per round")
	fs.IntVar(&cfg.Rounds, "rounds", 5, "rounds")
	fs.DurationVar(&cfg.Interval, "interval", time.Second, "time between the starts of rounds")
	fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
	fs.DurationVar(&cfg.Wait, "wait", 10*time.Second, "after the last publish, how long to wait for every delivery")
	fs.BoolVar(&cfg.Batch, "batch", false, "publish each channel's burst as one batch_events request (--burst at most 10) instead of one request per event naming every channel")
	fs.IntVar(&cfg.Publishers, "publishers", 1, "with --batch: requests in flight at once (each channel's bursts from one of them, in order)")
	fs.BoolVar(&cfg.PerChannel, "publish-per-channel", false, "one publisher per channel (--channels at most 256), all at once: each round, each sends its channel's burst as --burst single-event requests, each after the previous one's answer (excludes --batch and --publishers)")
	fs.BoolVar(&cfg.Spread, "spread-publishes", false, "with --publish-per-channel and several --ws nodes: channel c's publisher posts to node c mod N (its --ws URL with http for ws, https for wss) instead of --rest")
	return func(ctx context.Context, t bench.Target) (benchReport, bool, error) {
		cfg.Target = t
		rep, err := bench.Multichannel(ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		return rep, rep.Setup.Failed == 0 && rep.Lost.Count == 0 && rep.Delivery.Clean(), nil
	}
}

func rampScenario(fs *flag.FlagSet) benchRunner {
	cfg := bench.RampConfig{}
	fs.IntVar(&cfg.Conns, "conns", 15000, "connections to reach, at --rate (default 500/s)")
	channels := fs.String("channels", strings.Join(bench.DefaultRampChannels, ","), "channels every client joins, comma-separated")
	fs.DurationVar(&cfg.EventEvery, "event-every", time.Second, "the publisher sends one event to every channel this often")
	fs.DurationVar(&cfg.Hold, "hold", 10*time.Second, "after the last connection attempt, how long the run goes on")
	fs.DurationVar(&cfg.Every, "every", 10*time.Second, "report interval")
	fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
	fs.DurationVar(&cfg.Wait, "wait", 5*time.Second, "after the last publish, how long to wait for every delivery")
	return func(ctx context.Context, t bench.Target) (benchReport, bool, error) {
		cfg.Target, cfg.Channels = t, strings.Split(*channels, ",")
		rep, err := bench.Ramp(ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		clean := rep.Setup.Failed == 0 && rep.Lost.Count == 0 && rep.PublishFailures == 0 && rep.Delivery.Clean()
		return rep, clean, nil
	}
}

func churnScenario(fs *flag.FlagSet) benchRunner {
	cfg := bench.ChurnConfig{}
	fs.IntVar(&cfg.Steady, "steady", 1000, "steady subscribers")
	fs.DurationVar(&cfg.Duration, "duration", 30*time.Second, "how long cycles run, at --rate (default 1000/s)")
	fs.IntVar(&cfg.PerClient, "per-client", 5, "channels each cycle subscribes to")
	fs.Float64Var(&cfg.EventRate, "event-rate", 10, "events per second to the steady subscribers")
	fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
	fs.DurationVar(&cfg.Wait, "wait", 5*time.Second, "after the last publish, how long to wait for every delivery")
	fs.DurationVar(&cfg.Settle, "settle", 30*time.Second, "how long the server has to return to its baseline counts")
	return func(ctx context.Context, t bench.Target) (benchReport, bool, error) {
		cfg.Target = t
		rep, err := bench.Churn(ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		c, s := rep.Cycles, rep.ServerState
		clean := rep.Setup.Failed == 0 && rep.Lost.Count == 0 && rep.Delivery.Clean() && rep.PublishFailures == 0 &&
			c.Failed == 0 && c.CloseUnanswered == 0 && (s == nil || s.Returned)
		return rep, clean, nil
	}
}

func publishScenario(fs *flag.FlagSet) benchRunner {
	cfg := bench.PublishConfig{}
	fs.IntVar(&cfg.Publishers, "publishers", 8, "concurrent publishers")
	fs.IntVar(&cfg.Channels, "channels", 100, "channels, one subscriber each")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "how long the publishers publish")
	fs.IntVar(&cfg.Batch, "batch", 0, "events per batch_events request (0: one event per /events request; at most 10)")
	fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
	fs.DurationVar(&cfg.Wait, "wait", 5*time.Second, "after the last publish, how long to wait for every delivery")
	return func(ctx context.Context, t bench.Target) (benchReport, bool, error) {
		cfg.Target = t
		rep, err := bench.Publish(ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		return rep, rep.FailedRequests == 0 && rep.Lost.Count == 0 && rep.Delivery.Clean(), nil
	}
}

func presenceScenario(fs *flag.FlagSet) benchRunner {
	cfg := bench.PresenceConfig{}
	fs.IntVar(&cfg.Clients, "clients", 3000, "members in all, one connection each; client i joins channel i / --per-channel")
	fs.IntVar(&cfg.PerChannel, "per-channel", 100, "members per presence channel")
	fs.DurationVar(&cfg.Wait, "wait", 10*time.Second, "after the last join, how long every member has to see every other")
	restCheck := fs.Bool("rest-check", true, "ask every node's /channels for the user counts with every member joined, and for no channel after they leave")
	fs.DurationVar(&cfg.Settle, "settle", 10*time.Second, "how long each REST check may take to hold")
	return func(ctx context.Context, t bench.Target) (benchReport, bool, error) {
		cfg.Target, cfg.NoRESTCheck = t, !*restCheck
		rep, err := bench.Presence(ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		return rep, rep.Clean(), nil
	}
}

func channelsScenario(fs *flag.FlagSet) benchRunner {
	cfg := bench.ChannelsConfig{}
	fs.IntVar(&cfg.Channels, "channels", 10000, "channels, one subscriber each, spread over the --ws nodes")
	fs.IntVar(&cfg.Requests, "requests", 100, "GET /channels requests to time on --rest, one after another")
	fs.DurationVar(&cfg.Settle, "settle", 10*time.Second, "how long --rest has to list every channel before the timed requests")
	return func(ctx context.Context, t bench.Target) (benchReport, bool, error) {
		cfg.Target = t
		rep, err := bench.Channels(ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		return rep, rep.Clean(), nil
	}
}

func recoverScenario(fs *flag.FlagSet) benchRunner {
	cfg := bench.RecoverConfig{}
	fs.IntVar(&cfg.Clients, "clients", 1000, "clients, each subscribed to one history channel (client i on channel i mod --channels)")
	fs.IntVar(&cfg.Channels, "channels", 1, "history channels")
	fs.StringVar(&cfg.Channel, "channel", "recover", "the channel's name or, with several, their names' stem (<channel>-0, <channel>-1, ...); the server must keep history for them")
	fs.DurationVar(&cfg.Outage, "outage", 10*time.Second, "how long every client stays disconnected")
	fs.IntVar(&cfg.Events, "events", 100, "events published to every channel during the outage, spread over it")
	fs.IntVar(&cfg.Before, "before", 5, "events published to every channel before the outage")
	fs.IntVar(&cfg.After, "after", 5, "events published to every channel once every client recovered, to check the live events go on")
	fs.DurationVar(&cfg.LiveInterval, "live-interval", 0, "also publish a live event to every channel this often while the clients reconnect (0: none)")
	fs.IntVar(&cfg.PayloadBytes, "payload", 100, "bytes of each event's data")
	fs.DurationVar(&cfg.Wait, "wait", 30*time.Second, "bound of every wait: for the positions, the deliveries, and every client to recover once the reconnect started")
	fs.IntVar(&cfg.ReconnectConcurrency, "reconnect-concurrency", 0, "reconnects in flight at once (0: every client at once)")
	fs.BoolVar(&cfg.SwitchNodes, "switch-nodes", false, "with several --ws nodes, reconnect client i to node i+1 mod N: every client recovers from a node it was not on")
	killPID := fs.Int("kill-pid", 0, "the outage is a node's death: once the clients are positioned, send SIGKILL to this process (the herald node --kill-node names); its clients alone reconnect, round robin over the live nodes, and the others stay and get every event live (0: every connection drops instead)")
	fs.IntVar(&cfg.KillNode, "kill-node", 0, "with --kill-pid: the node that process serves, 0-based in --ws order")
	return func(ctx context.Context, t bench.Target) (benchReport, bool, error) {
		cfg.Target = t
		if *killPID > 0 {
			pid := *killPID
			cfg.Kill = func() error {
				p, err := os.FindProcess(pid)
				if err != nil {
					return err
				}
				return p.Kill()
			}
		}
		rep, err := bench.Recover(ctx, cfg)
		if err != nil {
			return nil, false, err
		}
		return rep, rep.Clean(), nil
	}
}
