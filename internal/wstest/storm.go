package wstest

import (
	"sync"
	"time"
)

// Storm dials n clients to ws://addr/path at once, as a reconnect storm does, each waiting up
// to a minute for its socket id. It returns the clients (nil where one failed, for the caller
// to close the others), how many failed and the first error.
func Storm(addr, path string, n int) (clients []*Client, failed int, first error) {
	clients = make([]*Client, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			cl, err := Dial(addr, path)
			if err == nil {
				if _, err = cl.SocketID(time.Minute); err != nil {
					cl.Close()
				}
			}
			if err != nil {
				errs[i] = err
				return
			}
			clients[i] = cl
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	return clients, failed, first
}
