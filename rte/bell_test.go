package rte_test

import (
	"testing"
	"time"

	"github.com/gompi/gompi/rte"
)

// A publication that lands just after the sleeper's first look (a peer's
// plain store still in its store buffer when the peer found nobody armed,
// so that it does not ring) is seen by the look at settleFor, not after the
// sleep's whole timeout.
func TestSleepLooksAgainAfterArming(t *testing.T) {
	b := rte.NewLocalBell(nil)
	looks := 0
	start := time.Now()
	wake, err := b.Sleep(nil, 2*time.Second, func() bool {
		looks++
		return looks > 1 // published after the first look, never rung
	})
	if err != nil {
		t.Fatal(err)
	}
	if wake != rte.WakeReady {
		t.Fatalf("Sleep ended by %v after %v (%d looks), want WakeReady: the look after the sleep's first microseconds should have seen the publication", wake, time.Since(start), looks)
	}
}

// Nothing published and nothing rung: Sleep blocks until its timeout, after
// its looks.
func TestSleepTimesOut(t *testing.T) {
	b := rte.NewLocalBell(nil)
	wake, err := b.Sleep(nil, 20*time.Millisecond, func() bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if wake != rte.WakeTimeout {
		t.Fatalf("Sleep ended by %v, want WakeTimeout", wake)
	}
}
