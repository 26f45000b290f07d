package servicetest

import (
	"net"
	"testing"
)

func TestStopStart(t *testing.T) {
	for _, s := range []*Server{Redis(t), NATS(t)} {
		pid := s.proc.cmd.Process.Pid
		s.Stop(t)
		if _, err := net.Dial("tcp", s.Addr()); err == nil {
			t.Errorf("%s (pid %d) still answers on %s after Stop", s.Name, pid, s.Addr())
		}
		s.Start(t)
		if err := s.probe(); err != nil {
			t.Errorf("%s after Start on %s: %v", s.Name, s.Addr(), err)
		}
	}
}

func TestKafkaStartStop(t *testing.T) {
	k := SharedKafka(t)
	if err := apiVersions(k.Addr()); err != nil {
		t.Fatal(err)
	}
	k.Stop()
	if err := apiVersions(k.Addr()); err == nil {
		t.Fatalf("kafka still answers on %s after Stop", k.Addr())
	}
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	if err := apiVersions(k.Addr()); err != nil {
		t.Fatalf("after Start: %v", err)
	}
}
