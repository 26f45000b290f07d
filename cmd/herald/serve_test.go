package main

import "testing"

// TestSpareFollowsWebSocketDescriptors: the public port borrows the WebSocket descriptors not
// in use, whatever max_connections caps, and nothing once they are taken.
func TestSpareFollowsWebSocketDescriptors(t *testing.T) {
	s := fdShare{capacity: 1000, httpConns: 256, limit: 20000, wsFDs: 19628}
	for _, tc := range []struct {
		connected int64
		want      int
	}{{0, 19628}, {1000, 18628}, {19628, 0}, {20000, 0}} {
		if got := s.spare(tc.connected); got != tc.want {
			t.Errorf("spare with %d connected = %d, want %d", tc.connected, got, tc.want)
		}
	}
	c := capacityOf(500, 256, 16)
	if c.wsFDs != c.limit-fdReserve-16-c.httpConns || c.capacity != min(500, c.wsFDs) {
		t.Errorf("capacityOf(500, 256, 16) = %+v: wsFDs must be the descriptors left for WebSocket clients, before max_connections", c)
	}
}
