package basic

import (
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
)

var _ coll.InterComponent = (*Component)(nil)

// QueryInter accepts every intercommunicator, with barrier, bcast and
// allreduce.
func (c *Component) QueryInter(b *mca.Base, comm coll.Inter) (int, coll.Module, error) {
	return Priority, &InterModule, nil
}

// InterModule is basic's intercommunicator algorithms: each a local phase
// on the local group's own communicator and one exchange between the two
// groups' rank 0s (MPICH's intercommunicator algorithms).
var InterModule = coll.Slots{
	coll.Barrier:   interBarrier,
	coll.Bcast:     interBcast,
	coll.Allreduce: interAllreduce,
}

func inter(c coll.Comm) (coll.Inter, error) {
	ic, ok := c.(coll.Inter)
	if !ok {
		return nil, mpierr.Errorf(mpierr.ErrComm, "coll basic: %s is not an intercommunicator", c.Name())
	}
	return ic, nil
}

// interBarrier: a local barrier, rank 0s exchange a token, a local bcast
// of it. No rank leaves before every rank of both groups has entered.
func interBarrier(c coll.Comm, a *coll.Args) error {
	ic, err := inter(c)
	if err != nil {
		return err
	}
	local := ic.Local()
	if err := Barrier(local, &coll.Args{Op: coll.Barrier}); err != nil {
		return err
	}
	var token [1]byte
	if local.Rank() == 0 {
		if _, err := c.Sendrecv(token[:], 0, coll.Tag(coll.Barrier, 0), token[:], 0, coll.Tag(coll.Barrier, 0)); err != nil {
			return err
		}
	}
	return Bcast(local, &coll.Args{Op: coll.Bcast, Recv: token[:], Root: 0})
}

// interBcast: the root sends to rank 0 of the other group, which
// broadcasts in its group; the root's group has nothing to do.
func interBcast(c coll.Comm, a *coll.Args) error {
	ic, err := inter(c)
	if err != nil {
		return err
	}
	tag := coll.Tag(coll.Bcast, 0)
	switch a.Root {
	case coll.Root:
		return c.Send(a.Recv, 0, tag)
	case coll.ProcNull:
		return nil
	}
	if a.Root < 0 || a.Root >= ic.RemoteSize() {
		return mpierr.Errorf(mpierr.ErrRoot, "coll basic: bcast on %s: root %d: accepted: Root, ProcNull, or 0 to %d", c.Name(), a.Root, ic.RemoteSize()-1)
	}
	local := ic.Local()
	if local.Rank() == 0 {
		if err := coll.RecvExactly(c, a.Recv, a.Root, tag); err != nil {
			return err
		}
	}
	return Bcast(local, &coll.Args{Op: coll.Bcast, Recv: a.Recv, Root: 0})
}

// interAllreduce: each group reduces to its rank 0, the rank 0s swap the
// results, and each broadcasts the other group's result in its group: every
// rank ends with the reduction of the remote group's inputs.
func interAllreduce(c coll.Comm, a *coll.Args) error {
	ic, err := inter(c)
	if err != nil {
		return err
	}
	local := ic.Local()
	mine := make([]byte, len(a.Recv))
	send := a.Send
	if a.InPlace {
		send = append([]byte(nil), a.Recv...)
	}
	if err := Reduce(local, &coll.Args{Op: coll.Reduce, Send: send, Recv: mine, Root: 0, Reducer: a.Reducer}); err != nil {
		return err
	}
	if local.Rank() == 0 {
		tag := coll.Tag(coll.Allreduce, 0)
		st, err := c.Sendrecv(mine, 0, tag, a.Recv, 0, tag)
		if err == nil && st.Count != len(a.Recv) {
			err = mpierr.Errorf(mpierr.ErrCount, "coll basic: allreduce on %s: the other group reduced %d bytes, this one %d", c.Name(), st.Count, len(a.Recv))
		}
		if err != nil {
			return err
		}
	}
	return Bcast(local, &coll.Args{Op: coll.Bcast, Recv: a.Recv, Root: 0})
}
