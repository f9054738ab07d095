package release

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

// TestPublishes has one goroutine fill a message and publish its number,
// and another wait for each number and check the message: a reader must
// never see a published number with an older message.
func TestPublishes(t *testing.T) {
	const rounds = 200000
	var msg [4]uint64
	var seq atomic.Uint64
	var ack atomic.Uint64
	done := make(chan error, 1)
	go func() {
		for k := uint64(1); k <= rounds; k++ {
			for seq.Load() != k {
				runtime.Gosched()
			}
			for i, v := range msg {
				if v != k*uint64(i+1) {
					done <- fmt.Errorf("message %d word %d: read %d, want %d", k, i, v, k*uint64(i+1))
					return
				}
			}
			ack.Store(k)
		}
		done <- nil
	}()
	for k := uint64(1); k <= rounds; k++ {
		for ack.Load() != k-1 {
			runtime.Gosched()
		}
		for i := range msg {
			msg[i] = k * uint64(i+1)
		}
		Store(&seq, k)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestStoreValue(t *testing.T) {
	var w atomic.Uint64
	for _, v := range []uint64{1, 0, 1<<63 | 5, ^uint64(0)} {
		Store(&w, v)
		if got := w.Load(); got != v {
			t.Fatalf("Store(%#x) then Load = %#x", v, got)
		}
	}
}

// PrefetchW and Prefetch are hints: they change no byte at any line of a
// buffer, nor at its last byte (a ring's end), asked for from another
// goroutine.
func TestPrefetchesChangeNothing(t *testing.T) {
	for _, h := range []struct {
		name  string
		fetch func(*byte)
	}{{"PrefetchW", PrefetchW}, {"Prefetch", Prefetch}} {
		buf := make([]byte, 4096)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		var rounds atomic.Uint64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				for i := 0; i < len(buf); i += 64 {
					h.fetch(&buf[i])
				}
				h.fetch(&buf[len(buf)-1])
				rounds.Add(1)
			}
		}()
		for rounds.Load() < 100 {
			runtime.Gosched()
		}
		close(stop)
		<-done
		for i := range buf {
			if buf[i] != byte(i*7) {
				t.Fatalf("byte %d is %d after %s, want %d", i, buf[i], h.name, byte(i*7))
			}
		}
	}
}
