module github.com/herald-rt/herald

go 1.26.8

require (
	github.com/BurntSushi/toml v1.4.0
	gopkg.in/yaml.v3 v3.0.1
)

require github.com/HdrHistogram/hdrhistogram-go v1.1.2
