package mpi

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gompi/gompi/mpierr"
)

// SplitShared is the split type of SplitType that groups the ranks of one
// node, those that can share memory (MPI_COMM_TYPE_SHARED).
const SplitShared = 1

// Dup makes a communicator of the same group with a context of its own
// (MPI_Comm_dup): its messages never match the parent's. Collective over c.
func (c *Comm) Dup() (*Comm, error) {
	if err := c.intraOnly("Dup"); err != nil {
		return nil, err
	}
	cid, err := c.agreeCID()
	if err != nil {
		return nil, fmt.Errorf("mpi: Comm.Dup of %s: %w", c.name, err)
	}
	nc, err := c.inst.newComm(uint16(cid), c.pc.Group, fmt.Sprintf("%s.dup(%d)", c.name, cid))
	if err != nil {
		c.inst.cids.set(cid, false)
		return nil, err
	}
	return nc, nil
}

// Split partitions c by color (MPI_Comm_split): the ranks that pass one
// color form a communicator, ordered by key and, for equal keys, by their
// rank in c. A rank that passes Undefined takes part and gets nil. Colors
// are 0 or more. Collective over c.
func (c *Comm) Split(color, key int) (*Comm, error) {
	if err := c.intraOnly("Split"); err != nil {
		return nil, err
	}
	if color < 0 && color != Undefined {
		return nil, mpierr.Errorf(mpierr.ErrArg, "mpi: Comm.Split of %s: color %d: accepted: 0 or more, or Undefined", c.name, color)
	}
	return c.split("Split", color, key)
}

// SplitType partitions c by the kind of locality splitType names
// (MPI_Comm_split_type): with SplitShared, the ranks of one node. Undefined
// as splitType gives nil, as Split's Undefined color does.
func (c *Comm) SplitType(splitType, key int) (*Comm, error) {
	if err := c.intraOnly("SplitType"); err != nil {
		return nil, err
	}
	color := Undefined
	switch splitType {
	case SplitShared:
		color = c.inst.rt.Job().NodeOf[c.pc.Group.World(c.pc.Rank)]
	case Undefined:
	default:
		return nil, mpierr.Errorf(mpierr.ErrArg, "mpi: Comm.SplitType of %s: split type %d: accepted: SplitShared (%d) or Undefined",
			c.name, splitType, SplitShared)
	}
	return c.split("SplitType", color, key)
}

// split gathers every rank's color and key, forms this rank's part, and
// agrees on one context id for all the parts (they are disjoint, so they
// can share it).
func (c *Comm) split(op string, color, key int) (*Comm, error) {
	n := c.pc.Size
	all := make([]int64, 2*n)
	if err := Allgather(c, []int64{int64(color), int64(key)}, all); err != nil {
		return nil, fmt.Errorf("mpi: Comm.%s of %s: %w", op, c.name, err)
	}
	var members []int
	if color != Undefined {
		for r := 0; r < n; r++ {
			if all[2*r] == int64(color) {
				members = append(members, r)
			}
		}
		// Stable: equal keys keep the order of c's ranks.
		slices.SortStableFunc(members, func(a, b int) int { return cmp.Compare(all[2*a+1], all[2*b+1]) })
	}
	cid, err := c.agreeCID()
	if err != nil {
		return nil, fmt.Errorf("mpi: Comm.%s of %s: %w", op, c.name, err)
	}
	if members == nil {
		c.inst.cids.set(cid, false)
		return nil, nil
	}
	g, err := c.inst.groups.ops.Incl(c.pc.Group, members)
	if err == nil {
		var nc *Comm
		if nc, err = c.inst.newComm(uint16(cid), g, fmt.Sprintf("%s.split(%d,%d)", c.name, color, cid)); err == nil {
			return nc, nil
		}
	}
	c.inst.cids.set(cid, false)
	return nil, fmt.Errorf("mpi: Comm.%s of %s: %w", op, c.name, err)
}
