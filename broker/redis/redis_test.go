package redis_test

import (
	"context"
	"strings"
	"testing"

	"github.com/herald-rt/herald/broker/brokertest"
	"github.com/herald-rt/herald/broker/redis"
	"github.com/herald-rt/herald/internal/servicetest"
)

func TestConformance(t *testing.T) {
	srv := servicetest.Redis(t)
	brokertest.Run(t, func(t *testing.T, nodes []brokertest.Node) brokertest.Cluster {
		c := brokertest.Cluster{Stop: srv.Stop, Start: srv.Start}
		for _, n := range nodes {
			b, err := redis.New(redis.Config{URL: srv.URL(), NodeID: n.ID,
				Prefix: "test." + strings.TrimPrefix(t.Name(), "TestConformance/")}, n.Handler)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			c.Brokers = append(c.Brokers, b)
		}
		return c
	})
}
