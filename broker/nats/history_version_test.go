package nats

import "testing"

func TestOlder(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"2.9.10", true}, {"2.10.29", true}, {"2.11.0", false}, {"2.11.0-RC.1", false}, {"2.12.15", false},
		{"v2.11.0", false}, {"3.0.0", false}, {"", true}, {"2.11", false}, {"1.99.99", true},
	} {
		if got := older(tc.v, MinReplicatedVersion); got != tc.want {
			t.Errorf("older(%q, %q) = %v, want %v", tc.v, MinReplicatedVersion, got, tc.want)
		}
	}
}
