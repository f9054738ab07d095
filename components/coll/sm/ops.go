package sm

import (
	"fmt"

	"github.com/gompi/gompi/frameworks/coll"
)

// enter sets the segment up if need be; false sends the call below.
func (m *module) enter(op coll.Op, c coll.Comm, a *coll.Args, bytes int) (bool, error) {
	if bytes > m.maxBytes {
		return false, nil
	}
	return m.ready(c)
}

func (m *module) why(bytes int) string {
	if bytes > m.maxBytes {
		return fmt.Sprintf("%d bytes are over %s (%d)", bytes, MaxBytesParam, m.maxBytes)
	}
	return "the shared segment could not be set up"
}

// barrier: publish, then wait for everyone's number.
func (m *module) barrier(c coll.Comm, a *coll.Args) error {
	if ok, err := m.enter(coll.Barrier, c, a, 0); !ok || err != nil {
		if err != nil {
			return err
		}
		return m.passOn(coll.Barrier, c, a, m.why(0))
	}
	k, err := m.begin(false)
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
	if ok, err := m.enter(coll.Allreduce, c, a, len(in)); !ok || err != nil {
		if err != nil {
			return err
		}
		return m.passOn(coll.Allreduce, c, a, m.why(len(in)))
	}
	k, err := m.contribute(in)
	if err != nil {
		return err
	}
	if err := m.waitAll(k); err != nil {
		return err
	}
	m.fold(a, k, a.Recv[:len(in)])
	return nil
}

// reduce: as allreduce, with only the root combining; the others leave at
// once (their slots stay untouched until everyone, root included, has
// started the operation after next).
func (m *module) reduce(c coll.Comm, a *coll.Args) error {
	in := a.Input()
	if ok, err := m.enter(coll.Reduce, c, a, len(in)); !ok || err != nil {
		if err != nil {
			return err
		}
		return m.passOn(coll.Reduce, c, a, m.why(len(in)))
	}
	k, err := m.contribute(in)
	if err != nil || m.me != a.Root {
		return err
	}
	if err := m.waitAll(k); err != nil {
		return err
	}
	m.fold(a, k, a.Recv[:len(in)])
	return nil
}

// bcast: the root writes its slot and leaves; the others wait for the
// root's number and copy.
func (m *module) bcast(c coll.Comm, a *coll.Args) error {
	if ok, err := m.enter(coll.Bcast, c, a, len(a.Recv)); !ok || err != nil {
		if err != nil {
			return err
		}
		return m.passOn(coll.Bcast, c, a, m.why(len(a.Recv)))
	}
	if m.me == a.Root {
		_, err := m.contribute(a.Recv)
		return err
	}
	k, err := m.begin(false)
	if err != nil {
		return err
	}
	m.publish(k)
	if err := m.waitFor(a.Root, k); err != nil {
		return err
	}
	copy(a.Recv, m.data(a.Root, k))
	return nil
}

// contribute starts an operation with in written to this rank's slot.
func (m *module) contribute(in []byte) (uint64, error) {
	k, err := m.begin(true)
	if err != nil {
		return 0, err
	}
	copy(m.data(m.me, k), in)
	m.publish(k)
	return k, nil
}

// fold combines the slots of operation k into out, in rank order from the
// last: out = x0 op (x1 op (… op x(n-1))), the order MPI asks of
// non-commutative ops.
func (m *module) fold(a *coll.Args, k uint64, out []byte) {
	n := len(out)
	copy(out, m.data(m.n-1, k)[:n])
	for r := m.n - 2; r >= 0; r-- {
		a.Reducer.Apply(m.data(r, k)[:n], out)
	}
}
