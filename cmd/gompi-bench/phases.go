package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gompi/gompi/mpi"
)

// tagPhases carries rank 1's phase medians to rank 0.
const tagPhases = 102

// phases times the parts of each timed iteration of a window on this rank:
// the window's posting (its Isends or Irecvs), its Waitall, and the rest of
// the iteration up to the next one's start (the ack, and waiting for it).
// A rank that spends nothing waiting is the one that bounds the rate; side
// by side with another MPI's figures (bench/bw_phases.c) it shows which part
// of whose work is longer. A nil *phases times nothing.
type phases struct {
	base time.Time
	t    []int64 // three stamps an iteration, ns since base
}

func newPhases(iters int) *phases {
	return &phases{base: time.Now(), t: make([]int64, 3*iters)}
}

// stamp records point k (0: start, 1: posted, 2: waited) of timed
// iteration i; warm-up iterations (i < 0) are not timed.
func (p *phases) stamp(i, k int) {
	if p == nil || i < 0 {
		return
	}
	p.t[3*i+k] = time.Since(p.base).Nanoseconds()
}

// medians returns this rank's median nanoseconds per message of each part.
func (p *phases) medians(win int) [3]float64 {
	n := len(p.t) / 3
	parts := [3][]float64{}
	for i := 0; i < n; i++ {
		s := p.t[3*i:]
		parts[0] = append(parts[0], float64(s[1]-s[0]))
		parts[1] = append(parts[1], float64(s[2]-s[1]))
		if i+1 < n {
			parts[2] = append(parts[2], float64(p.t[3*(i+1)]-s[2]))
		}
	}
	var out [3]float64
	for k, v := range parts {
		if len(v) == 0 {
			continue
		}
		slices.Sort(v)
		out[k] = v[len(v)/2] / float64(win)
	}
	return out
}

// report sends rank 1's medians to rank 0 and returns, on rank 0, both
// ranks' in one comment line, printed after the size's figure.
func (p *phases) report(c *mpi.Comm, size, win int) (string, error) {
	mine := p.medians(win)
	var buf [24]byte
	if c.Rank() == 1 {
		for k, v := range mine {
			binary.LittleEndian.PutUint64(buf[8*k:], math.Float64bits(v))
		}
		return "", c.Send(buf[:], 0, tagPhases)
	}
	if _, err := c.Recv(buf[:], 1, tagPhases); err != nil {
		return "", err
	}
	var peer [3]float64
	for k := range peer {
		peer[k] = math.Float64frombits(binary.LittleEndian.Uint64(buf[8*k:]))
	}
	return fmt.Sprintf("# phases size=%d window=%d rank0 post_ns=%.1f waitall_ns=%.1f ack_ns=%.1f rank1 post_ns=%.1f waitall_ns=%.1f ack_ns=%.1f\n",
		size, win, mine[0], mine[1], mine[2], peer[0], peer[1], peer[2]), nil
}
