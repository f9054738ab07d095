// Command faultprog is the program of the fault suite (internal/faulttest):
// four ranks at one phase of a job, one of them (the victim, chosen by the
// test) about to be killed from outside. Each rank says where it is with a
// line the test waits for; a rank that meets an error says so and calls
// Abort(1), as a careful program does.
//
//	faultprog init VICTIM        VICTIM prints "phase init <rank> <pid> <job>" and enters Init;
//	                             the others enter Init 2 s later, holding the modex fence open
//	faultprog rendezvous VICTIM  pairs (0,1), (2,3) pass a 64 MiB message back and forth
//	faultprog allreduce VICTIM   every rank runs Allreduce in a loop
//	faultprog finalize VICTIM    VICTIM prints "phase finalize …" and enters Finalize; the
//	                             others enter it 2 s later, holding its barrier open
//	faultprog ring VICTIM        a token goes round the ranks in a loop
//
// Outside init, every rank prints "phase <mode> <rank> <pid> <job>" once it
// is in the phase. The loops run until the job is ended.
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/gompi/gompi/mpi"
)

// hold is how long the peers keep the victim's phase open; much longer than
// the test's random delay before the kill.
const hold = 2 * time.Second

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: faultprog init|rendezvous|allreduce|finalize|ring VICTIM")
		os.Exit(2)
	}
	mode := os.Args[1]
	victim, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultprog: bad victim", os.Args[2])
		os.Exit(2)
	}
	rank, _ := strconv.Atoi(os.Getenv("PMI_RANK"))
	say := func(rank int) {
		fmt.Printf("phase %s %d %d %s\n", mode, rank, os.Getpid(), os.Getenv("GOMPI_JOB_ID"))
	}
	if mode == "init" {
		if rank == victim {
			say(rank)
		} else {
			time.Sleep(hold)
		}
	}
	inst, err := mpi.Init()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faultprog:", err)
		os.Exit(1)
	}
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "faultprog: rank %d: %v\n", inst.Rank(), err)
		inst.Abort(1)
	}
	world := inst.CommWorld()
	me, n := world.Rank(), world.Size()
	switch mode {
	case "init":
	case "rendezvous":
		// 64 MiB goes well above every eager limit: each transfer is a
		// rendezvous, and most of the time is spent inside one.
		buf := make([]byte, 64<<20)
		ack := make([]byte, 8)
		peer := me ^ 1
		if peer >= n {
			break
		}
		for i := 0; ; i++ {
			if i == 1 {
				say(me)
			}
			sender := me&1 == i&1 // the pair takes turns
			var err error
			if sender {
				if err = mpi.Send(world, buf, peer, 1); err == nil {
					_, err = mpi.Recv(world, ack, peer, 2)
				}
			} else {
				if _, err = mpi.Recv(world, buf, peer, 1); err == nil {
					err = mpi.Send(world, ack, peer, 2)
				}
			}
			if err != nil {
				fail(err)
			}
		}
	case "allreduce":
		in := make([]float64, 1024)
		out := make([]float64, 1024)
		for i := range in {
			in[i] = float64(me + i)
		}
		for i := 0; ; i++ {
			if i == 1 {
				say(me)
			}
			if err := mpi.Allreduce(world, in, out, mpi.Sum); err != nil {
				fail(err)
			}
		}
	case "ring":
		token := []int64{0}
		left, right := (me+n-1)%n, (me+1)%n
		for i := 0; ; i++ {
			if i == 1 {
				say(me)
			}
			if me == 0 {
				if err := mpi.Send(world, token, right, 1); err != nil {
					fail(err)
				}
			}
			if _, err := mpi.Recv(world, token, left, 1); err != nil {
				fail(err)
			}
			if me != 0 {
				token[0]++
				if err := mpi.Send(world, token, right, 1); err != nil {
					fail(err)
				}
			}
		}
	case "finalize":
		if err := mpi.Barrier(world); err != nil {
			fail(err)
		}
		if me == victim {
			say(me)
		} else {
			time.Sleep(hold)
		}
	default:
		fmt.Fprintln(os.Stderr, "faultprog: unknown mode", mode)
		inst.Abort(2)
	}
	if err := inst.Finalize(); err != nil {
		fmt.Fprintf(os.Stderr, "faultprog: rank %d: %v\n", me, err)
		os.Exit(1)
	}
}
