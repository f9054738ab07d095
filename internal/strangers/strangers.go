// Package strangers opens connections that never say a word, for the tests
// of servers that must close such connections within a handshake timeout
// and not be stalled by them (the tcp BTL's port, the modex node socket,
// the PMI listener).
package strangers

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// Flood is a set of silent connections, each watched by a goroutine that
// waits for the server to close it.
type Flood struct {
	results chan result
	n       int
}

type result struct {
	alive time.Duration // from dial to the server's close
	err   error
}

// Start opens n connections with dial (which may retry, and names what it
// dials in its errors) and watches each: the server closing it, by EOF or
// reset, is what is expected; a byte from the server is an error, and so
// is still being open after limit.
func Start(n int, limit time.Duration, dial func(i int) (net.Conn, error)) (*Flood, error) {
	f := &Flood{results: make(chan result, n), n: n}
	for i := 0; i < n; i++ {
		start := time.Now()
		conn, err := dial(i)
		if err != nil {
			return nil, fmt.Errorf("silent connection %d: %w", i, err)
		}
		go func() {
			defer conn.Close()
			conn.SetReadDeadline(time.Now().Add(limit))
			k, err := conn.Read(make([]byte, 1))
			var oe *net.OpError
			switch {
			case k > 0:
				err = fmt.Errorf("the server sent %d bytes to a silent stranger", k)
			case errors.Is(err, io.EOF) || (errors.As(err, &oe) && !oe.Timeout()):
				err = nil // closed, or reset
			}
			f.results <- result{time.Since(start), err}
		}()
	}
	return f, nil
}

// Wait waits until every connection has ended and returns the longest
// life, or the first connection the server did not close properly.
func (f *Flood) Wait() (longest time.Duration, err error) {
	for i := 0; i < f.n; i++ {
		r := <-f.results
		if r.err != nil && err == nil {
			err = fmt.Errorf("a silent connection was not closed: %w", r.err)
		}
		longest = max(longest, r.alive)
	}
	return longest, err
}
