package coll

import (
	"errors"
	"fmt"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/pml"
)

// Helpers shared by the algorithms of every component (Open MPI's
// coll/base): exchanges, waits, and the checks of what arrived.

// SmallExchange is the largest message Exchange sends before it receives.
// Below every BTL's eager limit, a blocking send completes without its
// receiver, so two ranks that both send first cannot deadlock; and a
// blocking send takes the low-latency path, which a non-blocking one never
// does.
const SmallExchange = 1024

// Exchange is Sendrecv for the pairwise steps of algorithms: small
// messages go as a blocking Send then a blocking Recv (no request, and the
// LLP when there is one: at 2 ranks an 8-byte allreduce costs about half),
// larger ones as Sendrecv. It returns the bytes received.
func Exchange(c Comm, sbuf []byte, dst int, rbuf []byte, src, tag int) (int, error) {
	var st pml.Status
	var err error
	if len(sbuf) > SmallExchange {
		st, err = c.Sendrecv(sbuf, dst, tag, rbuf, src, tag)
	} else if err = c.Send(sbuf, dst, tag); err == nil {
		st, err = c.Recv(rbuf, src, tag)
	}
	return st.Count, err
}

// Awaiter is an optional interface of a Comm whose waits are not the
// instance's blocking ones: the Comm a nonblocking collective runs a
// blocking algorithm on (Coroutine), where a wait gives the goroutine back
// to whoever advances the collective. Algorithms wait through the helpers
// (WaitAll, WaitCounts, Until, and the Comm's own Send, Recv and
// Sendrecv), which use it when the Comm has it, never through a Request's
// Wait.
type Awaiter interface {
	// Await returns once cond holds (at once when it holds already), or
	// with an error when the collective is abandoned.
	Await(cond func() bool) error
	// AwaitAll is Await for every request of reqs complete.
	AwaitAll(reqs []*pml.Request) error
}

// Until waits until cond holds: through c's Await when c is an Awaiter,
// otherwise through node's Until (the instance's wait policy). Writers of
// what cond reads ring sleeping readers, as Node.Until says.
func Until(c Comm, node Node, cond func() bool) error {
	if aw, ok := c.(Awaiter); ok {
		return aw.Await(cond)
	}
	return node.Until(cond)
}

// WaitAll waits for every request (nil ones are skipped) and joins their
// errors; on an Awaiter, through Await.
func WaitAll(c Comm, reqs ...*pml.Request) error {
	if aw, ok := c.(Awaiter); ok {
		if err := aw.AwaitAll(reqs); err != nil {
			return err
		}
	}
	var errs []error
	for _, r := range reqs {
		if _, err := r.Wait(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RecvExactly receives exactly len(buf) bytes from src: a shorter message
// means the ranks passed mismatched sizes, an ErrCount error that names
// both.
func RecvExactly(c Comm, buf []byte, src, tag int) error {
	st, err := c.Recv(buf, src, tag)
	if err != nil {
		return fmt.Errorf("coll: %s: from rank %d: %w", c.Name(), src, err)
	}
	return Exactly(c, st.Count, len(buf), src)
}

// Exactly checks that n bytes arrived from src where want were expected
// (pml.Exactly), naming the communicator and the rank that expected them.
func Exactly(c Comm, n, want, src int) error {
	if err := pml.Exactly(n, want, src); err != nil {
		return fmt.Errorf("coll: %s, at rank %d: %w", c.Name(), c.Rank(), err)
	}
	return nil
}

// Input is the rank's contribution to a reduction: Send, or Recv in place.
func (a *Args) Input() []byte {
	if a.InPlace {
		return a.Recv
	}
	return a.Send
}

// Layout returns each rank's offset and length in a gathered (or
// scattered) buffer: Displs and Counts for the v variants, equal blocks of
// block bytes otherwise.
func Layout(c Comm, a *Args, block int) (displs, counts []int) {
	if a.Counts != nil {
		return a.Displs, a.Counts
	}
	n := c.Size()
	displs, counts = make([]int, n), make([]int, n)
	for i := range displs {
		displs[i], counts[i] = i*block, block
	}
	return displs, counts
}

// WaitCounts waits for receives posted to every rank but skip, in rank
// order (reqs holds one per rank but skip), checks that each brought
// counts[r] bytes, and returns the first error.
func WaitCounts(c Comm, reqs []*pml.Request, counts []int, skip int) error {
	return waitEach(c, reqs, skip, func(r int) int { return counts[r] })
}

// WaitBlocks is WaitCounts where every rank sends block bytes.
func WaitBlocks(c Comm, reqs []*pml.Request, block, skip int) error {
	return waitEach(c, reqs, skip, func(int) int { return block })
}

// waitEach waits for reqs, the receives from every rank but skip in rank
// order, and checks that rank r's brought count(r) bytes.
func waitEach(c Comm, reqs []*pml.Request, skip int, count func(r int) int) error {
	if aw, ok := c.(Awaiter); ok {
		if err := aw.AwaitAll(reqs); err != nil {
			return err
		}
	}
	var first error
	for i, q := range reqs {
		r := i
		if i >= skip {
			r++
		}
		st, err := q.Wait()
		if err == nil {
			err = Exactly(c, st.Count, count(r), r)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// CeilLog2 is ⌈log2 n⌉ for n >= 1.
func CeilLog2(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// Pow2Floor is the largest power of two not above n (n >= 1).
func Pow2Floor(n int) int {
	p := 1
	for p*2 <= n {
		p *= 2
	}
	return p
}

// Blocks splits n bytes into parts blocks of whole elements (size bytes
// each), the first n/size mod parts blocks one element larger, and
// returns each block's offset and length. Algorithms that cut a buffer
// (ring, Rabenseifner, scatter-allgather) use it so that every rank cuts
// alike.
func Blocks(n, size, parts int) (off, length []int) {
	elems := n / size
	off, length = make([]int, parts), make([]int, parts)
	base, extra := elems/parts, elems%parts
	pos := 0
	for i := 0; i < parts; i++ {
		k := base
		if i < extra {
			k++
		}
		off[i], length[i] = pos*size, k*size
		pos += k
	}
	return off, length
}

// Combine combines in into inout in rank order: left is true when in holds
// the contribution of lower ranks (inout = in op inout); otherwise inout =
// inout op in, which for a non-commutative op needs tmp, a scratch buffer of
// len(inout).
func Combine(a *Args, in, inout, tmp []byte, left bool) {
	switch {
	case left:
		a.Reducer.Apply(in, inout)
	case a.Reducer.Commutative():
		a.Reducer.Apply(in, inout)
	default:
		datatype.CopyCached(tmp, in)
		a.Reducer.Apply(inout, tmp)
		datatype.CopyCached(inout, tmp)
	}
}
