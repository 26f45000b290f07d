// Command kafkabroker runs one Kafka broker for the test suites that are not Go (test/js),
// started exactly as the Go tests start theirs (servicetest.StartKafka: KRaft mode, Kafka's
// jars from Maven Central, fetched once and cached). Once the broker answers it prints one
// line, {"addr":"127.0.0.1:PORT"}, and it runs until its standard input closes (the test
// process ended, however it ended) or it gets SIGTERM or SIGINT; then it kills the broker
// and removes its files. It exits 3 when java is not installed, 1 on any other failure.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/herald-rt/herald/internal/servicetest"
)

func main() {
	k, err := servicetest.StartKafka()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafkabroker:", err)
		if errors.Is(err, servicetest.ErrNoJava) {
			os.Exit(3)
		}
		os.Exit(1)
	}
	defer k.Close()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	line, _ := json.Marshal(map[string]string{"addr": k.Addr()})
	if _, err := fmt.Println(string(line)); err != nil {
		return
	}
	select {
	case <-stop:
	case <-eof:
	}
}
