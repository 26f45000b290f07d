module github.com/herald-rt/herald/scripts/redisclients

go 1.26.8

require (
	github.com/herald-rt/herald v0.0.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/redis/rueidis v1.0.79
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

replace github.com/herald-rt/herald => ../..
