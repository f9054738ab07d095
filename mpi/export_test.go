package mpi

import (
	"github.com/gompi/gompi/frameworks/coll"
	"github.com/gompi/gompi/frameworks/pml"
)

// WrapCreateGroupTransport makes CreateGroup's lwgrp algorithm talk
// through f(parent) instead of the parent: tests count its rounds.
func (i *Instance) WrapCreateGroupTransport(f func(*Comm) pml.Transport) { i.groupTransport = f }

// ContextID is the communicator's context id: tests check that ids are
// reused after Free.
func (c *Comm) ContextID() int { return int(c.pc.CID) }

// OnAgreeDecision makes a coordinator call fn(k, to) after it sends the
// decision of its agreement k to rank to: tests kill it half-way through.
func (i *Instance) OnAgreeDecision(fn func(k uint32, to int)) { i.agreeHook = fn }

// OnDeathDelivery makes the instance call fn(w) half-way through learning
// of world rank w's death: after its collectives fail, before its
// AnySource receives do.
func (i *Instance) OnDeathDelivery(fn func(w int)) {
	i.ft.delivering.Lock() // procFailed reads it under this lock
	i.deliveryHook = fn
	i.ft.delivering.Unlock()
}

// KeptIallreduce reports whether c keeps an Iallreduce run for the same
// call made again.
func (c *Comm) KeptIallreduce() bool {
	r := c.nbReuse[coll.Allreduce].Load()
	return r != nil && r.idle.Load() == 1
}

// NBPlans counts the nonblocking and persistent collectives planned on c:
// a reused run is not planned again.
func (c *Comm) NBPlans() uint64 { return c.nbPlans.Load() }
