package guard

import (
	"hash/maphash"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
)

const sec = int64(time.Second)

func TestBucketAllowsBurstThenRate(t *testing.T) {
	r := Rate{PerSecond: 10, Burst: 5}
	var b Bucket
	now := int64(1000) * sec
	for i := 0; i < 5; i++ {
		if ok, _ := b.Take(r, now); !ok {
			t.Fatalf("take %d of the burst refused", i+1)
		}
	}
	ok, wait := b.Take(r, now)
	if ok {
		t.Fatal("6th take in the same instant allowed; burst is 5")
	}
	if wait != 100*time.Millisecond {
		t.Fatalf("wait = %v, want 100ms (one token at 10/s)", wait)
	}
	// 100 ms later exactly one token is back.
	now += sec / 10
	if ok, _ := b.Take(r, now); !ok {
		t.Fatal("take after one refill interval refused")
	}
	if ok, _ := b.Take(r, now); ok {
		t.Fatal("second take after one refill interval allowed")
	}
	// Over a long run the rate holds: 100 s at 10/s is about 1,000 tokens.
	allowed := 0
	for i := 0; i < 100_000; i++ {
		now += sec / 1000
		if ok, _ := b.Take(r, now); ok {
			allowed++
		}
	}
	if allowed < 995 || allowed > 1005 {
		t.Fatalf("allowed %d in 100 s at 10/s, want about 1,000", allowed)
	}
}

func TestBucketUnlimited(t *testing.T) {
	var b Bucket
	for i := 0; i < 1000; i++ {
		if ok, _ := b.Take(Rate{}, 0); !ok {
			t.Fatal("unlimited rate refused")
		}
	}
}

func TestIPRateIsPerAddressAndForgets(t *testing.T) {
	l := NewIPRate(Rate{PerSecond: 2, Burst: 2}, 0)
	a, b := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("::ffff:127.0.0.3")
	now := int64(5000) * sec
	for i := 0; i < 2; i++ {
		if !l.Allow(a, now) {
			t.Fatalf("attempt %d of a burst of 2 refused", i+1)
		}
	}
	if l.Allow(a, now) {
		t.Fatal("third attempt in the same instant allowed")
	}
	if !l.Allow(b, now) {
		t.Fatal("another address was refused: limits must be per address")
	}
	if !l.Allow(netip.MustParseAddr("127.0.0.3"), now) {
		t.Fatal("the IPv4-mapped and plain forms of one address must share a bucket, and it had one token left")
	}
	if l.Allow(b, now) {
		t.Fatal("the mapped form did not share the plain form's bucket")
	}
	if got := l.Tracked(); got != 2 {
		t.Fatalf("tracked %d addresses, want 2", got)
	}
	// After the buckets refill and a sweep interval passes, the addresses are forgotten. A
	// shard sweeps when it is next used: touch every shard, twice, with fresh addresses.
	touchAll := func(net byte) int {
		touched := map[uint64]bool{}
		n := 0
		for i := 0; len(touched) < ipShards; i++ {
			ip := netip.AddrFrom4([4]byte{10, net, byte(i >> 8), byte(i)})
			b16 := ip.As16()
			touched[maphash.Bytes(l.seed, b16[:])%ipShards] = true
			l.Allow(ip, now)
			n++
		}
		return n
	}
	now += int64(sweepEvery) + sec
	touchAll(0)
	now += int64(sweepEvery) + sec
	last := touchAll(1)
	if got := l.Tracked(); got != last {
		t.Fatalf("tracked %d addresses after two sweeps, want only the %d of the last round", got, last)
	}
}

func TestOrigins(t *testing.T) {
	o, err := ParseOrigins([]string{"https://app.example.com", "*.trusted.io", "http://localhost:3000"})
	if err != nil {
		t.Fatal(err)
	}
	for origin, want := range map[string]bool{
		"":                           true, // non-browser clients send none
		"https://app.example.com":    true,
		"HTTPS://APP.EXAMPLE.COM":    true,
		"http://app.example.com":     false, // scheme differs
		"https://app.example.com:81": false,
		"https://evil.com":           false,
		"https://a.trusted.io":       true,
		"http://b.c.trusted.io":      true,
		"https://trusted.io":         false, // the wildcard is for subdomains
		"https://eviltrusted.io":     false,
		"http://localhost:3000":      true,
		"http://localhost:3001":      false,
		"null":                       false,
	} {
		if got := o.Allowed(origin); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", origin, got, want)
		}
	}
	all, _ := ParseOrigins(nil)
	if !all.Allowed("https://anything.example") || all.Restricted() {
		t.Error("an empty list must allow every origin")
	}
	star, _ := ParseOrigins([]string{"*"})
	if !star.Allowed("https://anything.example") {
		t.Error(`"*" must allow every origin`)
	}
	for _, bad := range []string{"https://", "://x.com", "https://x.com/path", "a.*.com", "x.com?q"} {
		if _, err := ParseOrigins([]string{bad}); err == nil {
			t.Errorf("ParseOrigins(%q) accepted a malformed pattern", bad)
		}
	}
}

func TestMemoryGuardHysteresis(t *testing.T) {
	m, err := NewMemory(MemoryConfig{Limit: 1000, RefuseAbove: 0.9, AcceptBelow: 0.8}, nil)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		used     uint64
		refusing bool
	}{
		{500, false}, {900, false}, {901, true}, {850, true}, {800, true}, {799, false}, {850, false}, {950, true},
	}
	for _, s := range steps {
		m.Observe(s.used)
		if m.Refusing() != s.refusing {
			t.Fatalf("after %d of 1000 bytes: refusing = %v, want %v", s.used, m.Refusing(), s.refusing)
		}
	}
	if m.Trips() != 2 {
		t.Fatalf("trips = %d, want 2", m.Trips())
	}
	if _, err := NewMemory(MemoryConfig{Limit: 1, RefuseAbove: 0.5, AcceptBelow: 0.6}, nil); err == nil {
		t.Fatal("accept_below above refuse_above accepted")
	}
}

func TestMemoryGuardSamplesTheProcess(t *testing.T) {
	rss, err := ResidentBytes()
	if err != nil || rss == 0 {
		t.Fatalf("ResidentBytes = %d, %v", rss, err)
	}
	limit, err := DetectMemoryLimit()
	if err != nil || limit < rss {
		t.Fatalf("DetectMemoryLimit = %d, %v (RSS %d)", limit, err, rss)
	}
	// A limit below what the process already uses: the first sample refuses.
	m, err := NewMemory(MemoryConfig{Limit: rss / 2, Interval: 10 * time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()
	if !m.Refusing() || m.Used() < rss/2 {
		t.Fatalf("refusing = %v with %d bytes used over a %d limit", m.Refusing(), m.Used(), rss/2)
	}
	var never Memory
	if never.Refusing() {
		t.Fatal("zero guard refuses")
	}
}

// TestIPRateGroupsIPv6: IPv6 clients are counted by their /64 (or the prefix configured), so
// rotating through the addresses of one network gains nothing; other networks are apart.
func TestIPRateGroupsIPv6(t *testing.T) {
	now := int64(5000) * sec
	l := NewIPRate(Rate{PerSecond: 0.001, Burst: 2}, 0)
	for i, a := range []string{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff"} {
		if !l.Allow(netip.MustParseAddr(a), now) {
			t.Fatalf("attempt %d of a burst of 2 refused", i+1)
		}
	}
	if l.Allow(netip.MustParseAddr("2001:db8:1:2:abcd::9"), now) {
		t.Fatal("a third address of the same /64 allowed past the burst")
	}
	if !l.Allow(netip.MustParseAddr("2001:db8:1:3::1"), now) {
		t.Fatal("another /64 refused")
	}
	if !l.Allow(netip.MustParseAddr("203.0.113.7"), now) || !l.Allow(netip.MustParseAddr("203.0.113.8"), now) ||
		!l.Allow(netip.MustParseAddr("203.0.113.8"), now) || l.Allow(netip.MustParseAddr("203.0.113.8"), now) {
		t.Fatal("IPv4 addresses must each have their own bucket")
	}
	// A /48: the whole site shares one bucket; /128: each address its own.
	site := NewIPRate(Rate{PerSecond: 0.001, Burst: 1}, 48)
	if !site.Allow(netip.MustParseAddr("2001:db8:1:2::1"), now) || site.Allow(netip.MustParseAddr("2001:db8:1:ffff::1"), now) {
		t.Fatal("a /48 did not group its /64s")
	}
	each := NewIPRate(Rate{PerSecond: 0.001, Burst: 1}, 128)
	if !each.Allow(netip.MustParseAddr("2001:db8::1"), now) || !each.Allow(netip.MustParseAddr("2001:db8::2"), now) {
		t.Fatal("a /128 grouped two addresses")
	}
}

// TestResidentBytesFollowsTheProcess: each reading is fresh, though the file stays open: after
// the process touches 64 MiB more, ResidentBytes reports at least 32 MiB more.
func TestResidentBytesFollowsTheProcess(t *testing.T) {
	before, err := ResidentBytes()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 64<<20)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	after, err := ResidentBytes()
	if err != nil {
		t.Fatal(err)
	}
	if after < before+32<<20 {
		t.Fatalf("ResidentBytes %d, then %d after touching 64 MiB; want it to grow by 32 MiB at least", before, after)
	}
	runtime.KeepAlive(b)
}

// TestMemoryGuardSpacing: far below the refusal threshold the samples are spaced by the time
// a growth of growthBound a second takes to reach it, up to maxSpacing intervals; near it,
// above it and while refusing, by the interval.
func TestMemoryGuardSpacing(t *testing.T) {
	const base = 100 * time.Millisecond
	m, err := NewMemory(MemoryConfig{Limit: 10 << 30, RefuseAbove: 0.9, AcceptBelow: 0.8, Interval: base}, nil)
	if err != nil {
		t.Fatal(err)
	}
	refuse := uint64(0.9 * float64(10<<30))
	for _, c := range []struct {
		used uint64
		want time.Duration
	}{
		{0, maxSpacing * base},                           // 9 GiB below: 9 s, capped
		{refuse - growthBound/2, 500 * time.Millisecond}, // 512 MiB below: half a second
		{refuse - growthBound/100, base},                 // 10 MiB below: under the interval
		{refuse + 1, base},                               // above: refusing
		{refuse - growthBound/2, base},                   // refusing until below AcceptBelow
		{0, maxSpacing * base},                           // accepting again
	} {
		m.Observe(c.used)
		if got := m.next(); got != c.want {
			t.Errorf("%d bytes used of a %d threshold (refusing %v): next sample in %v, want %v", c.used, refuse, m.Refusing(), got, c.want)
		}
	}
}

// TestMemoryGuardSamplesSpaced: a process far below its threshold is sampled maxSpacing
// intervals apart, not every interval (on a busy machine the samples only come later).
func TestMemoryGuardSamplesSpaced(t *testing.T) {
	const base = 20 * time.Millisecond
	var mu sync.Mutex
	var at []time.Time
	read := func() (uint64, error) {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		return 1 << 20, nil
	}
	m, err := NewMemory(MemoryConfig{Limit: 100 << 30, Interval: base, Read: read}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	defer m.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(at)
		var gap time.Duration
		if n >= 3 {
			gap = at[2].Sub(at[1])
		}
		mu.Unlock()
		if n >= 3 {
			if gap < maxSpacing*base {
				t.Fatalf("samples %v apart, want at least %v", gap, maxSpacing*base)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d samples in 30 s", n)
		}
		time.Sleep(base)
	}
}
