package mpi

import (
	"errors"
	"fmt"

	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/lwgrp"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
)

// CreateGroupAlgorithmParam chooses how CreateGroup agrees on a context id.
const CreateGroupAlgorithmParam = "mpi_comm_create_group_algorithm"

// Values of mpi_comm_create_group_algorithm.
const (
	createGroupLwgrp = 0
	createGroupDinan = 1
)

func init() {
	mca.RegisterProjectParams("mpi", params.Def{
		Name: CreateGroupAlgorithmParam, Type: params.Enum, Default: "lwgrp", Level: 5,
		Values: []params.EnumValue{{Value: createGroupLwgrp, Name: "lwgrp"}, {Value: createGroupDinan, Name: "dinan"}},
		Help: "How Comm.CreateGroup builds a communicator among the group's members alone: " +
			"lwgrp (an allreduce of the members' free context ids over a light-weight ring of the members: " +
			"⌈log2 n⌉(+1) rounds) or dinan (the MPI_Comm_create_group paper's: intercommunicators between " +
			"halves, created and merged recursively: Θ(log² n) rounds)",
	})
}

// CreateGroup makes a communicator of g's members, called by them alone
// (MPI_Comm_create_group): ranks of c outside g need not call, and never
// block. g must be a subset of c's group; tag (0 or more) tells apart
// CreateGroups that run at the same time on overlapping groups. A rank not
// in g that calls it gets nil at once.
func (c *Comm) CreateGroup(g *Group, tag int) (*Comm, error) {
	const op = "CreateGroup"
	if err := c.intraOnly(op); err != nil {
		return nil, err
	}
	if err := g.check("Comm." + op); err != nil {
		return nil, err
	}
	if tag < 0 || tag > MaxTag {
		return nil, mpierr.Errorf(mpierr.ErrTag, "mpi: %s on %s: tag %d: accepted: 0 to %d", op, c.name, tag, MaxTag)
	}
	members, err := c.parentRanks(op, g)
	if err != nil {
		return nil, err
	}
	me := g.g.Rank(c.pc.Group.World(c.pc.Rank))
	if me == group.Undefined {
		return nil, nil
	}
	var nc *Comm
	switch c.inst.base.Lookup(CreateGroupAlgorithmParam).Int() {
	case createGroupDinan:
		nc, err = c.createGroupDinan(members, me, tag)
	default:
		nc, err = c.createGroupLwgrp(g, members, tag)
	}
	if err != nil {
		return nil, fmt.Errorf("mpi: %s on %s: %w", op, c.name, err)
	}
	return nc, nil
}

// cidWindowWords is the size of the window of context ids a CreateGroup
// agrees on at once: 4 words, 256 ids, 32 bytes an allreduce.
const cidWindowWords = 4

// createGroupLwgrp agrees on a context id among the members alone: each
// reserves the free ids of a window, the members AND their masks over a
// light-weight group of themselves (lwgrp's recursive doubling on the
// parent's point-to-point, with tag: ⌈log2 n⌉ rounds, one more for some n
// not a power of two), and all take the lowest id left; a window with none
// free everywhere sends them on to the next.
func (c *Comm) createGroupLwgrp(g *Group, members []int, tag int) (*Comm, error) {
	var t pml.Transport = c.guarded(members)
	if c.inst.groupTransport != nil {
		t = c.inst.groupTransport(c)
	}
	lg, err := lwgrp.LogChainFromList(t, members)
	if err != nil {
		return nil, err
	}
	ids := &c.inst.cids
	for base := 0; base <= maxCID; base += 64 * cidWindowWords {
		mine := ids.reserveWindow(base, cidWindowWords)
		all := make([]uint64, cidWindowWords)
		if err := lwgrp.Allreduce(lg, mine, all, BAnd, tag); err != nil {
			ids.releaseWindow(base, mine, -1)
			return nil, err
		}
		cid := -1
		for w, bits := range all {
			if bits != 0 {
				cid = base + 64*w + lowestBit(bits)
				break
			}
		}
		ids.releaseWindow(base, mine, cid)
		if cid < 0 {
			continue
		}
		nc, err := c.inst.newComm(uint16(cid), g.g, fmt.Sprintf("%s.group(%d)", c.name, cid))
		if err != nil {
			ids.set(cid, false)
			return nil, err
		}
		return nc, nil
	}
	return nil, mpierr.Errorf(mpierr.ErrIntern, "no context id is free in every member: %d communicators exist", maxCID+1)
}

func lowestBit(v uint64) int {
	i := 0
	for v&1 == 0 {
		v >>= 1
		i++
	}
	return i
}

// parentRanks returns the rank in c of each member of g, in g's order, or
// an ErrGroup error naming a member that is not in c.
func (c *Comm) parentRanks(op string, g *Group) ([]int, error) {
	n, _ := g.Size()
	ranks := make([]int, n)
	for i := range ranks {
		w := g.g.World(i)
		if ranks[i] = c.pc.Group.Rank(w); ranks[i] == group.Undefined {
			return nil, mpierr.Errorf(mpierr.ErrGroup, "mpi: %s on %s: rank %d of the group (world rank %d) is not in %s", op, c.name, i, w, c.name)
		}
	}
	return ranks, nil
}

// createGroupDinan is the algorithm of Dinan et al.: start from a
// communicator of one's own; at step i (1, 2, 4…) the block of i members
// holding this one joins the neighbouring block through an
// intercommunicator over c, with tag, and merges with it, the left block
// first, until one communicator holds the group in its order.
func (c *Comm) createGroupDinan(members []int, me, tag int) (*Comm, error) {
	n := len(members)
	cur, err := c.inst.CommSelf().Dup()
	if err != nil {
		return nil, err
	}
	for i := 1; i < n; i *= 2 {
		block := me / i
		left := block%2 == 0
		partner := (block - 1) * i
		if left {
			if partner = (block + 1) * i; partner >= n {
				continue // no block to the right at this step
			}
		}
		ic, err := cur.IntercommCreate(0, c, members[partner], tag)
		if err != nil {
			cur.Free()
			return nil, err
		}
		merged, err := ic.Merge(!left)
		err = errors.Join(err, ic.Free(), cur.Free())
		if err != nil {
			return nil, err
		}
		cur = merged
	}
	cur.name = fmt.Sprintf("%s.group(%d)", c.name, cur.pc.CID)
	return cur, nil
}
