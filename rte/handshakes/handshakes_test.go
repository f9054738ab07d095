package handshakes

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestSet: at the bound, Room waits while the pending handshakes are young,
// then closes the oldest; a pending one times out by itself; Close closes
// the rest and refuses more.
func TestSet(t *testing.T) {
	const timeout = 800 * time.Millisecond // grace 50 ms
	s := New(2, timeout)
	var peers []net.Conn
	add := func() net.Conn {
		a, b := net.Pipe()
		peers = append(peers, b)
		if !s.Add(a) {
			t.Fatal("Add refused")
		}
		return a
	}
	defer func() {
		for _, p := range peers {
			p.Close()
		}
	}()
	done := make(chan struct{})
	if !s.Room(done) {
		t.Fatal("no room in an empty set")
	}
	first := add()
	time.Sleep(5 * time.Millisecond)
	second := add()
	start := time.Now()
	if !s.Room(done) {
		t.Fatal("Room gave up")
	}
	if waited := time.Since(start); waited < s.grace/2 {
		t.Errorf("Room evicted after %v, before the grace period (%v)", waited, s.grace)
	}
	if _, err := first.Read(make([]byte, 1)); !closed(err) {
		t.Errorf("the oldest was not closed: %v", err)
	}
	if s.Done(first) {
		t.Error("Done reported the evicted connection pending")
	}
	// The second one's deadline ends its read.
	if _, err := second.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the second was not timed out: %v", err)
	}
	if !s.Done(second) {
		t.Error("Done did not find the second")
	}
	third := add()
	if pending, peak, evicted := s.Stats(); pending != 1 || peak != 2 || evicted != 1 {
		t.Errorf("stats %d pending, peak %d, %d evicted; want 1, 2, 1", pending, peak, evicted)
	}
	// Room gives up when told to.
	add()
	close(done)
	if s.Room(done) {
		t.Error("Room went on after done")
	}
	s.Close()
	if _, err := third.Read(make([]byte, 1)); !closed(err) {
		t.Errorf("Close did not close a pending one: %v", err)
	}
	a, b := net.Pipe()
	defer b.Close()
	if s.Add(a) || s.Room(make(chan struct{})) {
		t.Error("the set took more after Close")
	}
}

// closed tells the error of a read on a pipe closed at this end.
func closed(err error) bool {
	return errors.Is(err, io.ErrClosedPipe) || errors.Is(err, net.ErrClosed)
}
