package mpi

import "github.com/gompi/gompi/frameworks/pml"

// WrapCreateGroupTransport makes CreateGroup's lwgrp algorithm talk
// through f(parent) instead of the parent: tests count its rounds.
func (i *Instance) WrapCreateGroupTransport(f func(*Comm) pml.Transport) { i.groupTransport = f }

// ContextID is the communicator's context id: tests check that ids are
// reused after Free.
func (c *Comm) ContextID() int { return int(c.pc.CID) }

// OnAgreeDecision makes a coordinator call fn(k, to) after it sends the
// decision of its agreement k to rank to: tests kill it half-way through.
func (i *Instance) OnAgreeDecision(fn func(k uint32, to int)) { i.agreeHook = fn }
