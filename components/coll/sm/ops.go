package sm

import (
	"fmt"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
)

// route runs a call of bytes bytes below when sm does not take it (its
// size, or no segment), and then says so; otherwise it sets the segment
// up if need be and leaves the call to sm.
func (m *module) route(op coll.Op, c coll.Comm, a *coll.Args, bytes int) (passed bool, err error) {
	if bytes <= m.maxBytes && !m.goesBelow(op, bytes) {
		ready, err := m.ready(c)
		if err != nil || ready {
			return err != nil, err
		}
	}
	return true, m.passOn(op, c, a, bytes)
}

// goesBelow reports whether a blocking call of op that sm carries (bytes
// within coll_sm_max_bytes) goes to the module below all the same: small
// rooted calls (coll_sm_rooted_min_bytes, coll_sm_pair_bcast_min_bytes,
// coll_sm_gather_min_bytes) and, on two ranks, allgather and alltoall.
func (m *module) goesBelow(op coll.Op, bytes int) bool {
	switch op {
	case coll.Bcast:
		return bytes < m.bcastMin
	case coll.Reduce:
		return bytes < m.rootedMin
	case coll.Allgather, coll.Alltoall:
		// On two ranks one block each way, which the transport carries as
		// well: 32 KiB through sm was faster near and slower far.
		return m.n == 2
	case coll.Gather:
		return bytes < m.gatherMin
	case coll.Scatter:
		return bytes/m.n < m.gatherMin
	}
	return false
}

func (m *module) why(op coll.Op, bytes int) string {
	switch {
	case bytes > m.maxBytes:
		return fmt.Sprintf("%d bytes are over what sm carries on %d ranks (%d: %s, %s, %s)", bytes, m.n, m.maxBytes,
			MaxBytesParam, SegmentBytesParam, PairBytesParam)
	case op == coll.Reduce && bytes < m.rootedMin:
		return fmt.Sprintf("%d bytes are under %s (%d) where ranks outnumber cores", bytes, RootedMinParam, m.rootedMin)
	case op == coll.Allgather || op == coll.Alltoall:
		return "blocking allgathers and alltoalls on two ranks go below"
	case op == coll.Gather:
		return fmt.Sprintf("blocks of %d bytes are under %s (%d)", bytes, GatherMinParam, m.gatherMin)
	case op == coll.Scatter:
		return fmt.Sprintf("blocks of %d bytes are under %s (%d)", bytes/m.n, GatherMinParam, m.gatherMin)
	case op == coll.Bcast && bytes < m.bcastMin:
		return fmt.Sprintf("%d bytes are under %s (%d) where ranks outnumber cores, or %s (%d) on two ranks",
			bytes, RootedMinParam, m.rootedMin, PairBcastMinParam, m.bcastMin)
	}
	return "the shared segment could not be set up"
}

// barrier: publish, then wait for everyone's number.
func (m *module) barrier(c coll.Comm, a *coll.Args) error {
	if passed, err := m.route(coll.Barrier, c, a, 0); passed {
		return err
	}
	k, _, err := m.begin(false, 1)
	if err != nil {
		return err
	}
	m.publish(k)
	return m.waitAll(k)
}

// allreduce: every rank writes its input, and every rank combines all the
// slots in rank order, so that any op gets the same answer everywhere.
func (m *module) allreduce(c coll.Comm, a *coll.Args) error {
	in := a.Input()
	if passed, err := m.route(coll.Allreduce, c, a, len(in)); passed {
		return err
	}
	if m.splits(len(in)) {
		return m.allreduceSplit(a, in)
	}
	k, par, err := m.contribute(in, 1)
	if err != nil {
		return err
	}
	if err := m.waitAll(k); err != nil {
		return err
	}
	m.fold(a, par, a.Recv[:len(in)], 0)
	return nil
}

// splits reports whether an allreduce of bytes shares the combining out
// (allreduceSplit): from coll_sm_split_bytes, on three ranks or more. On
// two the split moves more memory than it saves (each rank combines half
// the vector, reading one block from each rank and writing half, then
// copies the whole result: 3.5 times the vector against 3 for combining it
// all) and waits twice: 2 ranks near, 16 / 32 / 64 KiB allreduces
// 1.24–1.25 / 2.40–2.63 / 4.64–5.37 µs split, 1.15–1.18 / 2.32–2.35 /
// 4.34–4.48 not (two ranks carry at most coll_sm_pair_bytes, 64 KiB).
func (m *module) splits(bytes int) bool { return m.n > 2 && bytes >= m.split }

// allreduceSplit shares the combining out: rank r combines block r of
// every rank's input into the shared result slot, and when all have,
// every rank copies the whole result: each combines 1/n of the vector
// where the plain way has each combine all of it.
func (m *module) allreduceSplit(a *coll.Args, in []byte) error {
	k, par, err := m.contribute(in, 2)
	if err != nil {
		return err
	}
	if err := m.waitAll(k); err != nil {
		return err
	}
	from, to := m.splitBlock(a, len(in))
	res := m.result(par, len(in))
	m.fold(a, par, res[from:to], from)
	m.publish(k + 1)
	if err := m.waitAll(k + 1); err != nil {
		return err
	}
	datatype.CopyCached(a.Recv[:len(in)], res)
	return nil
}

// splitBlock is the bytes [from, to) of an allreduce of bytes bytes that
// this rank combines when the combining is shared out: whole elements, the
// first ranks one more when they do not divide evenly.
func (m *module) splitBlock(a *coll.Args, bytes int) (from, to int) {
	elems, size := bytes/a.Reducer.Size, a.Reducer.Size
	base, extra := elems/m.n, elems%m.n
	from = (m.me*base + min(m.me, extra)) * size
	return from, from + (base+b2i(m.me < extra))*size
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// reduce: as allreduce, with only the root combining; the others leave at
// once (their slots stay untouched until everyone, root included, has
// started the operation after next).
func (m *module) reduce(c coll.Comm, a *coll.Args) error {
	in := a.Input()
	if passed, err := m.route(coll.Reduce, c, a, len(in)); passed {
		return err
	}
	k, par, err := m.contribute(in, 1)
	if err != nil || m.me != a.Root {
		return err
	}
	if err := m.waitAll(k); err != nil {
		return err
	}
	m.fold(a, par, a.Recv[:len(in)], 0)
	return nil
}

// bcast: the root writes its slot and leaves; the others wait for the
// root's number and copy.
func (m *module) bcast(c coll.Comm, a *coll.Args) error {
	if passed, err := m.route(coll.Bcast, c, a, len(a.Recv)); passed {
		return err
	}
	if m.me == a.Root {
		_, _, err := m.contribute(a.Recv, 1)
		return err
	}
	par, err := m.awaitRoot(a.Root)
	if err != nil {
		return err
	}
	datatype.CopyCached(a.Recv, m.data(a.Root, par, len(a.Recv)))
	return nil
}

// awaitRoot is a reader's side of a call whose root alone writes (bcast,
// scatter): it takes the call's number, publishes it (done reading the
// call before), waits for the root's, and returns the parity of the slot
// to read.
func (m *module) awaitRoot(root int) (int, error) {
	k, par, err := m.begin(false, 1)
	if err != nil {
		return 0, err
	}
	m.publish(k)
	return par, m.waitFor(root, k)
}

// contribute starts an operation of phases sequence numbers with in
// written to this rank's slot, and publishes the first.
func (m *module) contribute(in []byte, phases uint64) (uint64, int, error) {
	k, par, err := m.begin(true, phases)
	if err != nil {
		return 0, 0, err
	}
	datatype.CopyCached(m.data(m.me, par, len(in)), in)
	m.publish(k)
	return k, par, nil
}

// fold combines bytes [at, at+len(out)) of the slots of parity par into
// out, in rank order from the last: out = x0 op (x1 op (… op x(n-1))), the
// order MPI asks of non-commutative ops. The slots carry len(a.Input())
// bytes.
func (m *module) fold(a *coll.Args, par int, out []byte, at int) {
	n, total := len(out), len(a.Input())
	datatype.CopyCached(out, m.data(m.n-1, par, total)[at:at+n])
	for r := m.n - 2; r >= 0; r-- {
		a.Reducer.Apply(m.data(r, par, total)[at:at+n], out)
	}
}

// allgather: every rank writes its block, and every rank copies all the
// blocks once all have written.
func (m *module) allgather(c coll.Comm, a *coll.Args) error {
	in, bs := m.allgatherInput(a)
	if passed, err := m.route(coll.Allgather, c, a, bs); passed {
		return err
	}
	k, par, err := m.contribute(in, 1)
	if err != nil {
		return err
	}
	if err := m.waitAll(k); err != nil {
		return err
	}
	m.gatherOut(a, par, bs)
	return nil
}

// allgatherInput is this rank's block and its size.
func (m *module) allgatherInput(a *coll.Args) ([]byte, int) {
	if a.InPlace {
		bs := len(a.Recv) / m.n
		return a.Recv[m.me*bs : (m.me+1)*bs], bs
	}
	return a.Send, len(a.Send)
}

// gatherOut copies every rank's block of the slots of parity par into
// place (this rank's too, unless it is there already): allgather's end,
// and gather's root's.
func (m *module) gatherOut(a *coll.Args, par, bs int) {
	for r := 0; r < m.n; r++ {
		if r != m.me || !a.InPlace {
			datatype.CopyCached(a.Recv[r*bs:(r+1)*bs], m.data(r, par, bs))
		}
	}
}

// alltoall: every rank writes all its blocks, and every rank copies its
// block of each rank's slot once all have written.
func (m *module) alltoall(c coll.Comm, a *coll.Args) error {
	if passed, err := m.route(coll.Alltoall, c, a, len(a.Recv)); passed {
		return err
	}
	k, par, err := m.contribute(a.Input(), 1)
	if err != nil {
		return err
	}
	if err := m.waitAll(k); err != nil {
		return err
	}
	m.alltoallOut(a, par)
	return nil
}

// alltoallOut copies this rank's block of every rank's slot of parity par
// into place; in place, the slot holds this rank's input.
func (m *module) alltoallOut(a *coll.Args, par int) {
	total := len(a.Recv)
	bs := total / m.n
	for r := 0; r < m.n; r++ {
		datatype.CopyCached(a.Recv[r*bs:(r+1)*bs], m.data(r, par, total)[m.me*bs:(m.me+1)*bs])
	}
}

// gather: as reduce, with the root copying the slots instead of combining
// them; the others leave at once. Only for blocks of at least
// coll_sm_gather_min_bytes (gatherMin): below, the module below's
// messages let the others run ahead of the root.
func (m *module) gather(c coll.Comm, a *coll.Args) error {
	bs := len(a.Send)
	if m.me == a.Root {
		bs = len(a.Recv) / m.n
	}
	if passed, err := m.route(coll.Gather, c, a, bs); passed {
		return err
	}
	in := a.Send
	if a.InPlace {
		in = a.Recv[m.me*bs : (m.me+1)*bs]
	}
	k, par, err := m.contribute(in, 1)
	if err != nil || m.me != a.Root {
		return err
	}
	if err := m.waitAll(k); err != nil {
		return err
	}
	m.gatherOut(a, par, bs)
	return nil
}

// scatter: as bcast, with the root writing every rank's block into its
// slot and each rank copying its own; for blocks of at least gatherMin,
// and all of them within coll_sm_max_bytes.
func (m *module) scatter(c coll.Comm, a *coll.Args) error {
	bs := len(a.Recv)
	if m.me == a.Root && a.InPlace {
		bs = len(a.Send) / m.n
	}
	total := bs * m.n
	if passed, err := m.route(coll.Scatter, c, a, total); passed {
		return err
	}
	if m.me == a.Root {
		if _, _, err := m.contribute(a.Send[:total], 1); err != nil {
			return err
		}
		if !a.InPlace {
			datatype.CopyCached(a.Recv, a.Send[m.me*bs:(m.me+1)*bs])
		}
		return nil
	}
	par, err := m.awaitRoot(a.Root)
	if err != nil {
		return err
	}
	datatype.CopyCached(a.Recv, m.data(a.Root, par, total)[m.me*bs:(m.me+1)*bs])
	return nil
}
