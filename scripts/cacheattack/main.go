// Command cacheattack reproduces the memory attacks on cache channels against a running
// herald, for the measurements in docs/benchmarks-archive.md:
//
//	-mode rest:   signed REST calls, each publishing one event to -channels distinct cache
//	              channels (all distinct across calls)
//	-mode client: clients that each join -per-client private-cache-* channels of their own,
//	              send one client event to each within their rate limit, and leave
//
// It prints what it sent and exits non-zero if the server refused any of it.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/herald-rt/herald"
	"github.com/herald-rt/herald/internal/wstest"
	"github.com/herald-rt/herald/pusher"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6001", "herald's host:port")
	id := flag.String("app-id", "app-id", "app id")
	key := flag.String("app-key", "app-key", "app key")
	secret := flag.String("app-secret", "app-secret", "app secret")
	mode := flag.String("mode", "rest", "rest or client")
	n := flag.Int("n", 300, "REST calls or clients")
	channels := flag.Int("channels", 100, "cache channels per REST call")
	size := flag.Int("bytes", 10000, "bytes of each event's data")
	prefix := flag.String("prefix", "a", "channel name prefix, to keep runs apart")
	conc := flag.Int("c", 8, "concurrent calls or clients")
	perClient := flag.Int("per-client", 1, "private-cache-* channels each client joins and sends one event to")
	rate := flag.Float64("rate", 9, "client events per second per client (herald's default limit is 10)")
	flag.Parse()
	app := &herald.App{ID: *id, Key: *key, Secret: *secret}
	data := `{"pad":"` + strings.Repeat("x", *size-10) + `"}`

	var failed atomic.Int64
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				var err error
				if *mode == "rest" {
					err = restCall(*addr, app, *prefix, i, *channels, data)
				} else {
					err = clientEvents(*addr, app, *prefix, i, *perClient, *rate, data)
				}
				if err != nil {
					if failed.Add(1) <= 5 {
						fmt.Fprintln(os.Stderr, err)
					}
				}
			}
		}()
	}
	for i := 0; i < *n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	fmt.Printf("%s: %d sent, %d failed, %d client events over the rate limit, %d bytes of data each, in %v\n",
		*mode, *n, failed.Load(), limited.Load(), len(data), time.Since(start).Round(time.Millisecond))
	if failed.Load() > 0 {
		os.Exit(1)
	}
}

// limited counts the client events refused with 4301.
var limited atomic.Int64

func restCall(addr string, app *herald.App, prefix string, i, channels int, data string) error {
	chans := make([]string, channels)
	for j := range chans {
		chans[j] = fmt.Sprintf("cache-%s-%d-%d", prefix, i, j)
	}
	body, _ := json.Marshal(map[string]any{"name": "e", "channels": chans, "data": data})
	path := "/apps/" + app.ID + "/events"
	q := pusher.SignRequest(app, "POST", path, nil, body, time.Now())
	resp, err := http.Post("http://"+addr+path+"?"+q.Encode(), "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("call %d: status %d", i, resp.StatusCode)
	}
	return nil
}

func clientEvents(addr string, app *herald.App, prefix string, i, channels int, rate float64, data string) error {
	c, err := wstest.Dial(addr, "/app/"+app.Key+"?protocol=7")
	if err != nil {
		return err
	}
	defer c.Close()
	sid, err := c.SocketID(5 * time.Second)
	if err != nil {
		return err
	}
	chans := make([]string, channels)
	for j := range chans {
		chans[j] = fmt.Sprintf("private-cache-%s-%d-%d", prefix, i, j)
		if err := c.Subscribe(chans[j], app.Key+":"+pusher.Sign(app.Secret, sid+":"+chans[j]), ""); err != nil {
			return err
		}
	}
	for range chans {
		if _, err := c.Expect("pusher_internal:subscription_succeeded", 5*time.Second); err != nil {
			return err
		}
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	for _, ch := range chans {
		if err := c.WriteJSON(map[string]any{"event": "client-x", "channel": ch, "data": data}); err != nil {
			return err
		}
		<-tick.C
	}
	// The pong proves the client events were handled; an error before it is a refusal.
	if err := c.WriteJSON(map[string]any{"event": "pusher:ping", "data": map[string]any{}}); err != nil {
		return err
	}
	for {
		m, err := c.Read(5 * time.Second)
		switch {
		case err != nil:
			return err
		case m.Event == "pusher:pong":
			return nil
		case m.Event == "pusher:error" && strings.Contains(string(m.Data), "4301"):
			limited.Add(1) // over the rate: dropped, the connection stays
		case m.Event == "pusher:error" || m.Close != 0:
			return fmt.Errorf("client %d: got %s %s (close %d), want pusher:pong", i, m.Event, m.Data, m.Close)
		}
	}
}
