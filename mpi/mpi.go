// Package mpi is gompi's public API.
//
//	inst, err := mpi.Init()
//	if err != nil { log.Fatal(err) }
//	defer inst.Finalize()
//	fmt.Println("rank", inst.Rank(), "of", inst.Size())
//
// Everything belongs to an Instance: parameter values, selected components,
// the connection to the launcher. There is no package-level job state, so
// that several instances can live in one process (goroutine ranks in tests)
// and an instance can be finalized and a new one started.
package mpi

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	_ "github.com/gompi/gompi/components/builtin"
	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/params"
	"github.com/gompi/gompi/rte"
)

// Options configure InitWith. The zero value is what Init uses: the process
// environment, no extra settings, standard error for logs.
type Options struct {
	// Env is the environment snapshot parameters and the launcher's
	// variables are read from; nil means os.Environ().
	Env []string
	// MCA are parameter settings at command-line precedence.
	MCA []params.Setting
	// Catalog is the component catalogue; nil means mca.Default().
	Catalog *mca.Catalog
	// Output receives logs and reports; nil means os.Stderr.
	Output io.Writer
	// PMI is an established connection to a PMI server, for harnesses that
	// run ranks as goroutines (mpitest); Env then carries PMI_RANK and
	// PMI_SIZE.
	PMI io.ReadWriteCloser
	// Neighborhood holds the goroutine ranks of this process, for harnesses
	// that run several ranks in one process (mpitest): their waits then
	// wake each other directly.
	Neighborhood *rte.Neighborhood
	// Exit ends the rank after Abort; it is called on the aborting
	// goroutine. nil means exiting the process (after killing its process
	// group, so that its children go too), and then the process also exits
	// when its launcher goes away. A goroutine harness stops the goroutine
	// instead; its ranks see a lost launcher as errors from their calls.
	Exit func(code int)
}

// Instance is one initialized MPI process.
type Instance struct {
	rt   *rte.Runtime
	base *mca.Base
	bml  *btl.BML
	exit func(int)
	// groups is the group module and the world and self groups (group.go).
	groups groupState
	// p2p is the PML, the LLPs and the world and self communicators
	// (p2p.go).
	p2p p2pState
	// groupTransport, when set (tests: export_test.go), wraps the parent
	// that CreateGroup's lwgrp algorithm talks through, to count rounds.
	groupTransport func(*Comm) pml.Transport
	// reducers caches ops bound to element types (coll.go), and
	// lastReducer the last one looked up: a loop of one reduction finds it
	// with two compares instead of a map lookup (hashing the key cost an
	// 8-byte Allreduce a tenth of its time).
	reducers    sync.Map
	lastReducer atomic.Pointer[reducerEntry]

	mu        sync.Mutex
	finalized bool
}

// Init starts an instance from the process environment.
func Init() (*Instance, error) { return InitWith(Options{}) }

// InitWith starts an instance with explicit options.
func InitWith(o Options) (*Instance, error) {
	env := o.Env
	if env == nil {
		env = os.Environ()
	}
	out := o.Output
	if out == nil {
		out = os.Stderr
	}
	inst := &Instance{exit: o.Exit}
	var onLost func(error)
	if inst.exit == nil {
		inst.exit = exitProcess
		onLost = launcherLost
	}
	rt, err := rte.Start(rte.Options{Env: env, PMI: o.PMI, OnLost: onLost, Neighborhood: o.Neighborhood})
	if err != nil {
		return nil, fmt.Errorf("mpi: Init: %w", err)
	}
	inst.rt = rt
	job := rt.Job()
	base, err := mca.NewBase(mca.Options{
		Catalog: o.Catalog, Output: out, Rank: job.Rank, Reporter: job.Rank == 0,
		Sources: params.Sources{Env: env, CommandLine: o.MCA},
	})
	if err != nil {
		// Tell the launcher this rank cannot go on, so the job ends at once
		// rather than waiting for this rank at the next barrier.
		err = fmt.Errorf("mpi: Init (rank %d): %w", job.Rank, err)
		rt.Abort(1, err.Error())
		return nil, err
	}
	inst.base = base
	rt.SetLogger(base.Logger("rte"))
	if err := inst.setup(); err != nil {
		err = fmt.Errorf("mpi: Init (rank %d): %w", job.Rank, err)
		rt.Abort(1, err.Error())
		base.Close()
		return nil, err
	}
	return inst, nil
}

// setup selects the transports, exchanges business cards, and connects the
// layers.
func (i *Instance) setup() error {
	// Groups first: they are local, and a bad group setting should stop
	// Init before any transport starts.
	if err := i.groups.setup(i.base, i.Rank(), i.Size()); err != nil {
		return err
	}
	transports, err := btl.Select(i.base, i.rt)
	if err != nil {
		return err
	}
	// From here on a failure releases what was set up: goroutine ranks of a
	// failed Init must not leave listeners or mappings behind.
	undo := func(err error) error {
		if i.bml != nil {
			i.bml.Finalize()
		}
		i.p2p.finalize()
		return err
	}
	if err := i.p2p.selectLLP(i.base, i.rt); err != nil {
		btl.FinalizeSelected(transports)
		return undo(err)
	}
	// The first fence publishes the components' business cards; it is also
	// Init's barrier.
	if err := i.rt.Modex().Fence(context.Background()); err != nil {
		btl.FinalizeSelected(transports)
		return undo(err)
	}
	if i.bml, err = btl.NewBML(i.base, i.rt, transports); err != nil {
		return undo(err) // NewBML finalized the transports
	}
	setupErr := i.p2p.setup(i)
	// No rank leaves Init before every rank has set up its transports (as
	// Open MPI's MPI_Init ends with a barrier): a rank that returns and exits
	// at once must not pull the ground from under a peer still adding it.
	// That holds for a rank whose setup failed too (no collective fills an
	// operation, say): undoing removes segments its peers may still be
	// mapping, and they would report that instead of the real cause.
	if err := i.p2p.barrier(i.rt); err != nil && setupErr == nil {
		setupErr = err
	}
	if setupErr != nil {
		return undo(setupErr)
	}
	return nil
}

// launcherLost runs when the connection to the launcher of a rank process
// ends before Finalize: mpirun died or ended the job. The rank ends too.
func launcherLost(err error) {
	exitProcess(int(mpierr.ErrProcAborted))
}

// exitProcess ends the process and everything it started: a rank is the
// leader of its own process group (mpirun makes it so), so killing the group
// takes its children too.
func exitProcess(code int) {
	if pgid, err := syscall.Getpgid(0); err == nil && pgid == os.Getpid() {
		// The signal reaches this process too: ignore it, so that the exit
		// code is ours.
		signal.Ignore(syscall.SIGTERM)
		syscall.Kill(-pgid, syscall.SIGTERM)
	}
	os.Exit(code)
}

// Rank returns this process's rank in the world.
func (i *Instance) Rank() int { return i.rt.Job().Rank }

// Size returns the number of processes in the world.
func (i *Instance) Size() int { return i.rt.Job().Size }

// Node returns the name of the node (host) this process runs on.
func (i *Instance) Node() string { return i.rt.Job().Node }

// LocalRank returns this process's rank among the processes on its node.
func (i *Instance) LocalRank() int { return i.rt.Job().LocalRank }

// LocalSize returns the number of processes on this node.
func (i *Instance) LocalSize() int { return i.rt.Job().LocalSize }

// JobID returns the job's id.
func (i *Instance) JobID() string { return i.rt.Job().ID }

// Params returns the instance's MCA parameter values.
func (i *Instance) Params() *params.Values { return i.base.Params() }

// Base returns the instance's MCA base, for components and tools.
func (i *Instance) Base() *mca.Base { return i.base }

// Runtime returns the instance's run-time environment (identity, modex).
func (i *Instance) Runtime() *rte.Runtime { return i.rt }

// BML returns the instance's byte transfer layer, for tools and the tests of
// the transports.
func (i *Instance) BML() *btl.BML { return i.bml }

// Finalize ends the instance. Calling it twice is an error.
func (i *Instance) Finalize() error {
	i.mu.Lock()
	if i.finalized {
		i.mu.Unlock()
		return mpierr.Errorf(mpierr.ErrOther, "mpi: Finalize called twice")
	}
	i.finalized = true
	i.mu.Unlock()
	// Wait for everyone, so that no rank leaves while a peer may still need
	// it; then close components and say goodbye to the launcher.
	err := i.p2p.barrier(i.rt)
	if cerr := i.p2p.closeTables(); err == nil {
		err = cerr
	}
	if perr := i.p2p.finalize(); err == nil {
		err = perr
	}
	if berr := i.bml.Finalize(); err == nil {
		err = berr
	}
	if cerr := i.base.Close(); err == nil {
		err = cerr
	}
	if ferr := i.rt.Finalize(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("mpi: Finalize (rank %d): %w", i.Rank(), err)
	}
	return nil
}

// Finalized reports whether Finalize has been called.
func (i *Instance) Finalized() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.finalized
}

// Abort ends the whole job: the launcher kills every rank and exits with
// code. It does not return to its caller (a goroutine rank stops its
// goroutine).
func (i *Instance) Abort(code int) {
	i.mu.Lock()
	i.finalized = true
	i.mu.Unlock()
	i.p2p.down.Store(true)
	i.rt.Abort(code, fmt.Sprintf("rank %d called Abort(%d)", i.Rank(), code))
	i.exit(code)
}
