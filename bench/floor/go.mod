module github.com/herald-rt/herald/bench/floor

go 1.26.8

require github.com/gobwas/ws v1.5.0

require github.com/gobwas/httphead v0.1.0 // indirect
