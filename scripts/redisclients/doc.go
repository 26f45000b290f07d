// Package redisclients measures the two Redis clients considered for broker/redis,
// github.com/redis/rueidis and github.com/redis/go-redis/v9, publishing to a real
// redis-server with pipelining. It is its own module so that the client not
// chosen stays out of herald's go.mod. Run:
//
//	cd scripts/redisclients && go test -run x -bench . -benchtime 2s
//
// The figures and the choice are in docs/benchmarks-archive.md ("Cluster bus: Redis client, and the three engines").
package redisclients
