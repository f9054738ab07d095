// Package faulttest is the fault suite: real jobs of four ranks on two
// cores beside a CPU hog, over shared memory and over tcp, in which a random
// rank is killed with SIGKILL at each phase of a job (inside Init before
// its modex fence completes, in the middle of a 64 MiB rendezvous, inside an
// Allreduce loop, inside Finalize, and, as the issue that asked for the
// suite found it, while a token goes round the ranks). Every round checks that the job ends
// within 3 s, non-zero; that mpirun's first line names the killed rank, its
// pid and the signal; and that no process of the job and no file of it in
// /dev/shm remains.
//
// go test runs three rounds of each phase and transport (one under -short);
// GOMPI_FAULT_ROUNDS=N runs N, and the test logs a table of the rounds, the
// time from the kill to mpirun's exit (min/median/max) and how often the
// killed rank was named first:
//
//	GOMPI_FAULT_ROUNDS=100 go test -v -run TestFaults -timeout 2h ./internal/faulttest
package faulttest
