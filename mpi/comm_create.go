package mpi

import (
	"fmt"
	"sync"

	"github.com/gompi/gompi/frameworks/group"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// Context ids: 0 and 1 are the world and self; Create allocates the others.
// A process keeps the set of ids it uses; a new communicator takes an id
// that is free in every process of its parent, agreed by a reduction.
const maxCID = 1<<16 - 1

// cidSet is an instance's context ids in use.
type cidSet struct {
	mu   sync.Mutex
	used [maxCID + 1]bool
}

func (s *cidSet) lowestFreeFrom(from int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := max(from, 2); c <= maxCID; c++ {
		if !s.used[c] {
			return c
		}
	}
	return -1
}

// reserve marks c used if it is free, and reports whether it was: an
// agreement holds its candidate while it asks the others, so that another
// agreement running at the same time in this process (CreateGroups with
// different tags) cannot take it too.
func (s *cidSet) reserve(c int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c < 2 || c > maxCID || s.used[c] {
		return false
	}
	s.used[c] = true
	return true
}

// reserveWindow marks used every id of [base, base+64·words) that is free
// and returns them as a bit mask (bit i of word w: id base+64w+i). A
// CreateGroup holds its window while the members combine their masks, so
// that another agreement running at the same time in this process looks
// elsewhere.
func (s *cidSet) reserveWindow(base, words int) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	mask := make([]uint64, words)
	for i := 0; i < 64*words; i++ {
		if c := base + i; c >= 2 && c <= maxCID && !s.used[c] {
			s.used[c] = true
			mask[i/64] |= 1 << (i % 64)
		}
	}
	return mask
}

// releaseWindow frees the ids of a reserved mask, but keep (-1: none).
func (s *cidSet) releaseWindow(base int, mask []uint64, keep int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < 64*len(mask); i++ {
		if mask[i/64]&(1<<(i%64)) != 0 && base+i != keep {
			s.used[base+i] = false
		}
	}
}

func (s *cidSet) set(c int, used bool) {
	s.mu.Lock()
	s.used[c] = used
	s.mu.Unlock()
}

// reduceMaxAll computes, over every rank of c, the maximum of v and the
// logical AND of ok, and gives the result to every rank: one in-place
// Allreduce of max(v) and max(not ok), through allMax.
func reduceMaxAll(allMax func(buf []int64) error, v int, ok bool) (int, bool, error) {
	buf := []int64{int64(v), 1}
	if ok {
		buf[1] = 0
	}
	if err := allMax(buf); err != nil {
		return 0, false, err
	}
	return int(buf[0]), buf[1] == 0, nil
}

// agreeCID finds a context id free in every process of c and marks it used,
// agreeing through c's collectives.
func (c *Comm) agreeCID() (int, error) {
	return c.agreeCIDWith(c.allMax)
}

// allMax is the in-place max-Allreduce through c's collectives.
func (c *Comm) allMax(buf []int64) error { return Allreduce(c, buf, buf, Max) }

// agreeCIDWith is agreeCID with the in-place max-Allreduce over c that it
// agrees through.
func (c *Comm) agreeCIDWith(allMax func(buf []int64) error) (int, error) {
	ids := &c.inst.cids
	from := 2
	for {
		mine := ids.lowestFreeFrom(from)
		if mine < 0 {
			mine = maxCID + 1 // no free id here: make the agreement fail
		}
		cid, _, err := reduceMaxAll(allMax, mine, true)
		if err != nil {
			return 0, err
		}
		if cid > maxCID {
			return 0, mpierr.Errorf(mpierr.ErrIntern, "mpi: no free context id: %d communicators exist", maxCID+1)
		}
		held := ids.reserve(cid)
		_, allFree, err := reduceMaxAll(allMax, cid, held)
		if err != nil {
			if held {
				ids.set(cid, false)
			}
			return 0, err
		}
		if allFree {
			return cid, nil
		}
		if held {
			ids.set(cid, false)
		}
		from = cid + 1
	}
}

// Create makes a communicator of the processes of g, which must be a subset
// of c's group (MPI_Comm_create). It is collective over c: every rank of c
// calls it with the same group. Members get the new communicator; the other
// ranks get nil (MPI_COMM_NULL) and no error.
func (c *Comm) Create(g *Group) (*Comm, error) {
	if err := c.intraOnly("Create"); err != nil {
		return nil, err
	}
	if err := g.check("Comm.Create"); err != nil {
		return nil, err
	}
	// Every member of g must be in c: translate g's ranks into c's group.
	parent := newGroup(c.inst.groups.ops, c.pc.Group)
	n, _ := g.Size()
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i
	}
	if n > 0 {
		in, err := g.TranslateRanks(ranks, parent)
		if err != nil {
			return nil, fmt.Errorf("mpi: Comm.Create: %w", err)
		}
		for i, r := range in {
			if r == Undefined {
				return nil, mpierr.Errorf(mpierr.ErrGroup, "mpi: Comm.Create: rank %d of the group (world rank %d) is not in %s",
					i, g.g.World(i), c.name)
			}
		}
	}
	cid, err := c.agreeCID()
	if err != nil {
		return nil, fmt.Errorf("mpi: Comm.Create on %s: %w", c.name, err)
	}
	me := g.g.Rank(c.pc.Group.World(c.pc.Rank))
	if n == 0 || me == group.Undefined {
		c.inst.cids.set(cid, false)
		return nil, nil
	}
	nc, err := c.inst.newComm(uint16(cid), g.g, fmt.Sprintf("%s.create(%d)", c.name, cid))
	if err != nil {
		c.inst.cids.set(cid, false)
		return nil, err
	}
	return nc, nil
}

// Free releases a communicator made by Create; the world and self cannot be
// freed. Pending operations on it must have completed: a nonblocking
// collective still in flight, or a receive or send not complete, is an
// ErrPending error, and the communicator stays (its modules' memory, coll
// sm's segment say, is what the collective is using; a receive posted on a
// forgotten context id would never complete). Sends complete for the
// program (eager, buffered) may still be on their way: they go out.
func (c *Comm) Free() error {
	if err := c.check("Free"); err != nil {
		return err
	}
	if c.pc.CID < 2 {
		return mpierr.Errorf(mpierr.ErrComm, "mpi: Free of %s: the world and self communicators cannot be freed", c.name)
	}
	if n := c.inst.runsOn(c); n > 0 {
		return mpierr.Errorf(mpierr.ErrPending, "mpi: Free of %s: %d nonblocking collective(s) on it still in flight: complete them (Wait, Test) first", c.name, n)
	}
	if pc, ok := c.inst.pml.(pml.PendingCounter); ok {
		if n := pc.Pending(&c.pc); n > 0 {
			return mpierr.Errorf(mpierr.ErrPending, "mpi: Free of %s: %d point-to-point operation(s) on it not complete: complete them (Wait, Test), or Cancel the receives, first", c.name, n)
		}
	}
	c.dropReusedRuns()
	c.inst.collTables.drop(c.coll)
	if err := c.coll.Finalize(); err != nil {
		return fmt.Errorf("mpi: Free of %s: %w", c.name, err)
	}
	c.inst.unregisterFT(c)
	if err := c.inst.pml.DelComm(&c.pc); err != nil {
		return fmt.Errorf("mpi: Free of %s: %w", c.name, err)
	}
	if c.local != nil {
		if err := c.local.Free(); err != nil {
			return fmt.Errorf("mpi: Free of %s: %w", c.name, err)
		}
	}
	c.inst.cids.set(int(c.pc.CID), false)
	c.freed.Store(true)
	return nil
}
