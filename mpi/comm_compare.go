package mpi

import (
	"fmt"

	"github.com/gompi/gompi/frameworks/group"
)

// Compare compares two communicators (MPI_Comm_compare):
//
//   - Ident: they are one communicator (the same handle, the same context);
//   - Congruent: their groups have the same members in the same order, in
//     different contexts (a Dup, a Create of the whole group);
//   - Similar: the same members in another order (a Split with other keys);
//   - Unequal: anything else.
//
// Intercommunicators compare their local groups and their remote groups
// alike: Congruent when both pairs have the same members in the same
// order, Similar when both have the same members and either pair another
// order, Unequal otherwise. An intercommunicator and an intracommunicator
// are Unequal. Compare is local: it sends nothing. A nil or freed
// communicator, or one of a finalized instance, is an ErrComm error.
func (c *Comm) Compare(other *Comm) (Comparison, error) {
	const op = "Comm.Compare"
	if err := c.check(op); err != nil {
		return Unequal, err
	}
	if err := other.check(op); err != nil {
		return Unequal, fmt.Errorf("mpi: %s: the second communicator: %w", op, err)
	}
	// A context id belongs to one live communicator of an instance.
	if c == other || (c.inst == other.inst && c.pc.CID == other.pc.CID) {
		return Ident, nil
	}
	if c.IsInter() != other.IsInter() {
		return Unequal, nil
	}
	local, err := group.Compare(c.localGroup(), other.localGroup())
	if err != nil {
		return Unequal, fmt.Errorf("mpi: %s on %s: %w", op, c.name, err)
	}
	remote := group.Ident
	if c.IsInter() {
		if remote, err = group.Compare(c.pc.Group, other.pc.Group); err != nil {
			return Unequal, fmt.Errorf("mpi: %s on %s: %w", op, c.name, err)
		}
	}
	switch {
	case local == group.Unequal || remote == group.Unequal:
		return Unequal, nil
	case local == group.Ident && remote == group.Ident:
		return Congruent, nil
	}
	return Similar, nil
}

// localGroup is the group of c's own side: its group, or an
// intercommunicator's local group.
func (c *Comm) localGroup() *group.Group {
	if c.pc.Local != nil {
		return c.pc.Local
	}
	return c.pc.Group
}
