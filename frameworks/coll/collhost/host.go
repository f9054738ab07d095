package collhost

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/coll/schedule"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mca/plugin"
)

func init() { plugin.RegisterAdapter("coll", adapt) }

func adapt(h *plugin.Handle) (mca.Component, error) {
	return &component{h: h, inst: map[*mca.Base]*instance{}}, nil
}

// component stands for one coll plugin in the catalogue. Each instance that
// opens it gets a process of its own and a cache of the plugin's answers.
type component struct {
	h *plugin.Handle

	mu   sync.Mutex
	inst map[*mca.Base]*instance
}

type instance struct {
	proc *plugin.Process

	mu     sync.Mutex
	broken error
	// answers are the plugin's schedules by communicator size and rank:
	// its answer depends on nothing else, so a Dup or a Split of the same
	// shape costs no call.
	answers map[[2]int]*answer
}

type answer struct {
	slots    coll.Slots
	filled   int
	declined string
}

func (c *component) Info() mca.Info { return c.h.Desc.Info() }

func (c *component) Register(r *mca.Registrar) {
	for _, d := range c.h.Desc.Defs() {
		r.Add(d)
	}
}

var (
	_ mca.Opener = (*component)(nil)
	_ mca.Closer = (*component)(nil)
)

// Open starts the plugin's process for this instance.
func (c *component) Open(b *mca.Base) error {
	p, err := c.h.Start(b)
	if err != nil {
		b.Logger("coll").Warn("coll plugin skipped", "reason", err.Error())
		return mca.Decline("%v", err)
	}
	c.mu.Lock()
	c.inst[b] = &instance{proc: p, answers: map[[2]int]*answer{}}
	c.mu.Unlock()
	return nil
}

// Close stops the instance's process.
func (c *component) Close(b *mca.Base) error {
	c.mu.Lock()
	in := c.inst[b]
	delete(c.inst, b)
	c.mu.Unlock()
	if in != nil {
		in.proc.Stop()
	}
	return nil
}

// Query asks the plugin, once per communicator shape, which operations it
// fills and how; a plugin that fails (an error, a bad schedule, a crash, no
// answer in time) is reported and declines from then on in this instance.
func (c *component) Query(b *mca.Base, comm coll.Comm) (int, coll.Module, error) {
	c.mu.Lock()
	in := c.inst[b]
	c.mu.Unlock()
	if in == nil {
		return 0, nil, mca.Decline("not open in this instance")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.broken != nil {
		return 0, nil, mca.Decline("given up on earlier: %v", in.broken)
	}
	key := [2]int{comm.Size(), comm.Rank()}
	a := in.answers[key]
	if a == nil {
		var err error
		if a, err = ask(in.proc, comm.Size(), comm.Rank()); err != nil {
			in.broken = err
			b.Logger("coll").Warn("coll plugin skipped", "reason", err.Error())
			in.proc.Stop()
			return 0, nil, mca.Decline("%v", err)
		}
		in.answers[key] = a
	}
	if a.filled == 0 {
		return 0, nil, mca.Decline("plugin %s fills no operation on %d ranks: %s", in.proc.Path(), comm.Size(), a.declined)
	}
	return c.h.Desc.Priority, &a.slots, nil
}

func ask(p *plugin.Process, size, rank int) (*answer, error) {
	req, _ := json.Marshal(Request{Size: size, Rank: rank})
	b, err := p.Query(req)
	if err != nil {
		return nil, err
	}
	scheds, declined, err := ParseReply(b, size, rank)
	if err != nil {
		return nil, fmt.Errorf("plugin %s: %w", p.Path(), err)
	}
	a := &answer{declined: declined}
	for op, s := range scheds {
		a.slots[op] = func(c coll.Comm, args *coll.Args) error { return schedule.Run(c, args, s) }
		a.filled++
	}
	if declined == "" {
		a.declined = "no reason given"
	}
	return a, nil
}
