module github.com/herald-rt/herald

go 1.26.8
