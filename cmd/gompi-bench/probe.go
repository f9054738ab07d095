package main

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gompi/gompi/components/common/shmem"
	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/release"
)

// The placement probe of mpi-anchors/placement.h: PROBE_W warm-up then
// PROBE_N timed round trips of two flags, each on its own cache line (128
// bytes apart), busy-waiting; the result is the one-way time in ns. The host
// moves this machine's two vCPUs between a near and a far placement, and
// every latency follows; the probe tells which one a measurement saw.
const (
	probeN = 10000
	probeW = 1000
	// spinsBeforeYield bounds a busy wait before it lets others run, so
	// that an oversubscribed node does not stall the probe for a time
	// slice per round trip.
	spinsBeforeYield = 1 << 20
)

// prober shares one page between ranks 0 and 1: a file in /dev/shm named
// gompi-<jobid>-bench-probe, so that the launcher's clean-up removes it if
// the job dies, mode 0600, and removed as soon as both ranks have mapped it.
type prober struct {
	rank       int
	seg        *shmem.Segment
	ping, pong *atomic.Uint64
	seq        uint64
}

// probeShm makes and removes the probe's file; its errors start with
// gompi-bench.
var probeShm = shmem.Owner{Name: "gompi-bench"}

// newProber sets the page up; ranks other than 0 and 1 get a nil prober,
// whose measurements are -1.
func newProber(c *mpi.Comm, jobID string) (*prober, error) {
	me := c.Rank()
	if me > 1 {
		return nil, nil
	}
	name := shmem.Path(jobID, "bench-probe")
	var token [1]byte
	p := &prober{rank: me}
	var err error
	if me == 0 {
		if p.seg, err = probeShm.Create(name, 4096); err != nil {
			return nil, err
		}
		// Rank 1 maps it, says so; then nobody needs the name.
		err = c.Send(token[:], 1, tagProbe)
		if err == nil {
			_, err = c.Recv(token[:], 1, tagProbe)
		}
		if uerr := probeShm.Unlink(name); err == nil {
			err = uerr
		}
	} else {
		if _, err = c.Recv(token[:], 0, tagProbe); err == nil {
			if p.seg, err = shmem.Open(name, 4096); err != nil {
				err = fmt.Errorf("gompi-bench: %w", err)
			}
			// Answer even when mapping failed, so that rank 0 removes the
			// file; the error ends the job anyway.
			if serr := c.Send(token[:], 0, tagProbe); err == nil {
				err = serr
			}
		}
	}
	if err != nil {
		p.close()
		return nil, err
	}
	p.ping = (*atomic.Uint64)(unsafe.Pointer(&p.seg.Mem[0]))
	p.pong = (*atomic.Uint64)(unsafe.Pointer(&p.seg.Mem[128]))
	p.ns(c) // the first one is slow (fresh page, cold lines): discard it
	return p, nil
}

func (p *prober) close() {
	if p != nil {
		p.seg.Unmap()
	}
}

// ns runs the probe on ranks 0 and 1 and returns, on rank 0, the one-way
// time in ns; -1 elsewhere or without a prober.
func (p *prober) ns(c *mpi.Comm) float64 {
	if p == nil {
		return -1
	}
	// Start together: a zero-byte exchange.
	peer := 1 - p.rank
	if err := errors.Join(c.Send(nil, peer, tagProbe), second(c.Recv(nil, peer, tagProbe))); err != nil {
		return -1
	}
	var t0 time.Time
	for i := 0; i < probeW+probeN; i++ {
		if i == probeW {
			t0 = time.Now()
		}
		p.seq++
		s := p.seq
		// Release stores, as placement.h's: sync/atomic's Store is a
		// locked exchange that waits for the line, and read ~1.5× the C
		// probe (125 ns where it read 85), so the summaries took gompi's
		// near runs for mixed ones.
		if p.rank == 0 {
			release.Store(p.ping, s)
			spinUntil(p.pong, s)
		} else {
			spinUntil(p.ping, s)
			release.Store(p.pong, s)
		}
	}
	if p.rank != 0 {
		return -1
	}
	return float64(time.Since(t0).Nanoseconds()) / (2 * probeN)
}

func spinUntil(w *atomic.Uint64, v uint64) {
	for n := 1; w.Load() != v; n++ {
		if n%spinsBeforeYield == 0 {
			runtime.Gosched()
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
}

func second[T any](_ T, err error) error { return err }
