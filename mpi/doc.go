// Package mpi is gompi's public API: MPI for Go programs, started by
// mpirun (or Slurm, or MPICH's Hydra), or alone as a singleton.
//
// Start with Init, then the world communicator:
//
//	inst, err := mpi.Init()
//	if err != nil { log.Fatal(err) }
//	defer inst.Finalize()
//	w := inst.CommWorld()
//	fmt.Println("rank", w.Rank(), "of", w.Size())
//
// Everything belongs to an Instance: parameter values, selected components,
// the connection to the launcher. There is no package-level job state, so
// that several instances can live in one process (goroutine ranks in tests)
// and an instance can be finalized and a new one started. Every method is
// safe for concurrent use by several goroutines.
//
// What to reach for (the examples show each family at work):
//
//   - Point-to-point: Send and Recv, generic over slices of basic types
//     (Elem), and their byte forms, the Comm methods; Isend, Irecv and
//     Waitall to overlap; Ssend, Rsend, Bsend for the other modes.
//     Request.WaitContext and WaitallContext give a wait a deadline.
//   - Probes: Comm.Probe and Comm.Iprobe; Comm.Mprobe and Comm.Improbe
//     (matched probes) when several goroutines receive on one communicator.
//   - Collectives: Bcast, Reduce, Gather, Scatter (rooted); Allgather,
//     Allreduce, Alltoall; Scan and Exscan; ReduceScatter(Block); the
//     v-forms (Gatherv, Alltoallv …); in place by passing the same slice
//     (each function's doc says how). Predefined ops (Sum, Max, MaxLoc …)
//     or your own with NewOp.
//   - Nonblocking and persistent collectives: Ibcast, Iallreduce … return a
//     Request; AllreduceInit … plan once and Start many times.
//   - Communicators: Comm.Dup, Comm.Split, Comm.SplitType (a node's ranks),
//     Comm.Create and Comm.CreateGroup from a Group (Instance.WorldGroup,
//     Group.Incl …), Comm.IntercommCreate and Comm.Merge.
//   - Failures: errors carry MPI classes (errors.Is(err, mpi.ErrTruncate),
//     ErrorClass). With mpirun --enable-recovery a rank's death is an
//     ErrProcFailed error, and Comm.Revoke, Comm.Agree and Comm.Shrink
//     (ULFM) let the survivors go on: docs/fault-tolerance.md.
//
// Components are chosen per instance by MCA parameters (mpirun --mca,
// OMPI_MCA_ environment variables, files); ompi_info lists them, and
// Comm.CollTable says which component fills each collective. Package
// mpitest runs a job's ranks as goroutines of one test, which is how the
// examples here run; package lwgrp has collectives over groups that need no
// communicator. README.md is the way in to the guide in docs/.
package mpi
