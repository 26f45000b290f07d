package servicetest

import "testing"

// TestNATSCluster: three servers form a cluster with a JetStream meta leader; one killed,
// the other two keep (or elect) a leader; restarted, it joins again.
func TestNATSCluster(t *testing.T) {
	c := NATSClusterJetStream(t, 3)
	leader, err := c.MetaLeader(0)
	if err != nil {
		t.Fatal(err)
	}
	victim := 0
	for i := range c.Servers {
		if c.Name(i) == leader {
			victim = i
		}
	}
	c.Servers[victim].Stop(t)
	c.Wait(t)
	c.Servers[victim].Start(t)
	c.Wait(t)
	if got, want := c.URL(1), c.Servers[1].URL()+","+c.Servers[0].URL()+","+c.Servers[2].URL(); got != want {
		t.Errorf("URL(1) = %q, want %q", got, want)
	}
}
