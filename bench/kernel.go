package bench

import (
	"os"
	"strconv"
	"strings"
)

// kernelSample is the machine's TCP sockets and kernel memory at one moment, from
// /proc/net/sockstat and /proc/meminfo (Linux). They are the whole machine's: whatever else
// runs there moves them too.
type kernelSample struct {
	TCPInuse    int64 `json:"tcp_inuse"`     // sockstat TCP inuse: TCP sockets open
	TCPMemPages int64 `json:"tcp_mem_pages"` // sockstat TCP mem: pages of socket buffers
	SlabKB      int64 `json:"slab_kb"`       // meminfo Slab
	SUnreclaim  int64 `json:"sunreclaim_kb"` // meminfo SUnreclaim
	AvailableKB int64 `json:"available_kb"`  // meminfo MemAvailable
}

// readKernel samples the kernel's figures; ok is false where /proc does not have them.
func readKernel() (s kernelSample, ok bool) {
	b, err := os.ReadFile("/proc/net/sockstat")
	if err != nil {
		return s, false
	}
	for line := range strings.Lines(string(b)) {
		if rest, found := strings.CutPrefix(line, "TCP:"); found {
			f := strings.Fields(rest)
			for i := 0; i+1 < len(f); i += 2 {
				n, _ := strconv.ParseInt(f[i+1], 10, 64)
				switch f[i] {
				case "inuse":
					s.TCPInuse = n
				case "mem":
					s.TCPMemPages = n
				}
			}
		}
	}
	b, err = os.ReadFile("/proc/meminfo")
	if err != nil {
		return s, false
	}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "Slab:":
			s.SlabKB = n
		case "SUnreclaim:":
			s.SUnreclaim = n
		case "MemAvailable:":
			s.AvailableKB = n
		}
	}
	return s, true
}

// KernelMemory is the kernel's share of the connections: the machine's TCP sockets and
// kernel memory before connecting and once the server's RSS settled, and the growth per
// socket opened (each loopback connection is two sockets, the client's and the server's).
type KernelMemory struct {
	Before  kernelSample `json:"before"`
	After   kernelSample `json:"after"`
	Sockets int64        `json:"sockets"` // TCPInuse's growth
	// Per socket, in bytes: socket buffers (sockstat's mem pages), all slab memory, its
	// unreclaimable part. AvailablePerConn is MemAvailable's fall per connection (both ends,
	// user space and kernel: the machine's whole cost of one connection, generator included).
	BuffersPerSocket  float64 `json:"buffers_per_socket_bytes"`
	SlabPerSocket     float64 `json:"slab_per_socket_bytes"`
	SUnreclaimPerSock float64 `json:"sunreclaim_per_socket_bytes"`
	AvailablePerConn  float64 `json:"available_per_conn_bytes"`
}

// kernelMemory compares two samples; conns is the connections opened between them.
func kernelMemory(before, after kernelSample, conns int) *KernelMemory {
	k := &KernelMemory{Before: before, After: after, Sockets: after.TCPInuse - before.TCPInuse}
	if k.Sockets > 0 {
		n := float64(k.Sockets)
		k.BuffersPerSocket = float64((after.TCPMemPages-before.TCPMemPages)*int64(os.Getpagesize())) / n
		k.SlabPerSocket = float64((after.SlabKB-before.SlabKB)<<10) / n
		k.SUnreclaimPerSock = float64((after.SUnreclaim-before.SUnreclaim)<<10) / n
	}
	if conns > 0 {
		k.AvailablePerConn = float64((before.AvailableKB-after.AvailableKB)<<10) / float64(conns)
	}
	return k
}
