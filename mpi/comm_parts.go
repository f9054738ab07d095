package mpi

// The parts of a communicator that coll modules make for their phases
// (coll.Splitter): hidden communicators, owned and freed by the module.

import (
	"fmt"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/mpierr"
)

var _ coll.Splitter = collComm{}

// NodeOf is the node index of rank r, as the launcher mapped it.
func (x collComm) NodeOf(r int) int { return x.c.inst.rt.Job().NodeOf[x.c.pc.Group.World(r)] }

// Split makes this rank's part among parts, agreeing on one context id for
// all of them (they are disjoint, so they can share it) through agree.
func (x collComm) Split(parts [][]int, agree coll.Func) (coll.Sub, error) {
	c := x.c
	n, me := c.pc.Size, c.pc.Rank
	var mine []int
	seen := make([]bool, n)
	for k, p := range parts {
		for _, r := range p {
			if r < 0 || r >= n || seen[r] {
				return nil, mpierr.Errorf(mpierr.ErrArg, "mpi: parts of %s: part %d: rank %d is outside 0..%d or in another part", c.name, k, r, n-1)
			}
			seen[r] = true
			if r == me {
				mine = p
			}
		}
	}
	red, err := reducer[int64](c, "parts", Max)
	if err != nil {
		return nil, err
	}
	allMax := func(buf []int64) error {
		a := &coll.Args{Recv: datatype.Bytes(buf), InPlace: true, Reducer: red}
		return c.coll.CallFunc(coll.Allreduce, agree, x, a)
	}
	cid, err := c.agreeCIDWith(allMax)
	if err != nil {
		return nil, fmt.Errorf("mpi: parts of %s: %w", c.name, err)
	}
	if mine == nil {
		c.inst.cids.set(cid, false)
		return nil, nil
	}
	g, err := c.inst.groups.ops.Incl(c.pc.Group, mine)
	if err == nil {
		var pc *Comm
		if pc, err = c.inst.newPart(uint16(cid), g, fmt.Sprintf("%s.part(%d,%d)", c.name, mine[0], cid)); err == nil {
			c.inst.adoptFT(c, pc)
			return subComm{collComm{pc}}, nil
		}
	}
	c.inst.cids.set(cid, false)
	return nil, fmt.Errorf("mpi: parts of %s: %w", c.name, err)
}

// subComm is a part as the module that made it sees it.
type subComm struct{ collComm }

func (x subComm) Call(op coll.Op, a *coll.Args) error { return x.c.coll.Call(op, x.collComm, a) }

func (x subComm) Table() *coll.Table { return x.c.coll }

func (x subComm) Start(op coll.Op, a *coll.Args) (func() error, error) {
	req, err := x.c.nonblocking(op, "part "+op.String(), x.c.argsOwning(a))
	if err != nil {
		return nil, err
	}
	return func() error {
		_, err := req.Wait()
		return err
	}, nil
}

// NBTag takes the part's next run tag; the caller is a Plan's Start, under
// the instance's nbc.mu, which guards nbSeq.
func (x subComm) NBTag() int {
	t := coll.NBTag(x.c.nbSeq)
	x.c.nbSeq++
	return t
}

// Free releases the part without the checks of Comm.Free: the module that
// made it frees it, also while the instance finalizes.
func (x subComm) Free() error {
	c := x.c
	if c.freed.Swap(true) {
		return nil
	}
	c.dropReusedRuns()
	err := c.coll.Finalize()
	c.inst.unregisterFT(c)
	if derr := c.inst.pml.DelComm(&c.pc); err == nil {
		err = derr
	}
	c.inst.cids.set(int(c.pc.CID), false)
	if err != nil {
		return fmt.Errorf("mpi: free of %s: %w", c.name, err)
	}
	return nil
}
