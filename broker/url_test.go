package broker

import "testing"

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://127.0.0.1:4222":                 "nats://127.0.0.1:4222",
		"nats://s3cret-token@127.0.0.1:4222":    "nats://xxxxx@127.0.0.1:4222",
		"nats://u:pw@a:4222,nats://u:pw@b:4222": "nats://u:xxxxx@a:4222,nats://u:xxxxx@b:4222",
		"redis://:hunter2@10.0.0.1:6379/0":      "redis://:xxxxx@10.0.0.1:6379/0",
		"rediss://user:hunter2@10.0.0.1:6379/0": "rediss://user:xxxxx@10.0.0.1:6379/0",
		"nats://a b:%zz@host":                   "(unparsable URL)",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
