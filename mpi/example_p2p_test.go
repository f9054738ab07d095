package mpi_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/gompi/gompi/mpi"
	"github.com/gompi/gompi/mpitest"
)

// A rank sends a slice of float64 to itself and receives it: typed calls
// are package-level generic functions over slices.
func ExampleSend() {
	inst, err := mpi.Init() // started without a launcher: a singleton, rank 0 of 1
	if err != nil {
		log.Fatal(err)
	}
	defer inst.Finalize()
	c := inst.CommSelf()

	if err := mpi.Send(c, []float64{1.5, 2.5, 3.5}, 0, 7); err != nil {
		log.Fatal(err)
	}
	got := make([]float64, 10)
	st, err := mpi.Recv(c, got, mpi.AnySource, mpi.AnyTag)
	if err != nil {
		log.Fatal(err)
	}
	n, _ := mpi.Count[float64](st)
	fmt.Println(st.Source, st.Tag, n, got[:n])
	// Output: 0 7 3 [1.5 2.5 3.5]
}

// Mprobe takes a message out of matching, so that the goroutine that probed
// it is the one that receives it, with a buffer of the right size.
func ExampleComm_Mprobe() {
	inst, err := mpi.Init()
	if err != nil {
		log.Fatal(err)
	}
	defer inst.Finalize()
	c := inst.CommSelf()

	if err := c.Send([]byte("hello"), 0, 1); err != nil {
		log.Fatal(err)
	}
	msg, st, err := c.Mprobe(mpi.AnySource, mpi.AnyTag)
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, st.Count)
	if _, err := c.Mrecv(buf, msg); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d bytes: %s\n", st.Count, buf)
	// Output: 5 bytes: hello
}

// Isend and Irecv return at once: each rank posts its receive and its send
// around a ring, then waits for both. Posting both before waiting is what
// keeps a ring of blocking sends from deadlocking. Four goroutine ranks
// (package mpitest) stand for four processes started by mpirun.
func ExampleIsend() {
	const n = 4
	got := make([]int, n) // written by each rank at its own index, read after Run
	err := mpitest.RunErr(n, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		me := w.Rank()
		right, left := (me+1)%n, (me+n-1)%n
		in := make([]int, 1)
		reqs := make([]*mpi.Request, 2)
		var err error
		if reqs[0], err = mpi.Irecv(w, in, left, 0); err != nil {
			return err
		}
		if reqs[1], err = mpi.Isend(w, []int{me * 10}, right, 0); err != nil {
			return err
		}
		if err := mpi.Waitall(reqs, nil); err != nil {
			return err
		}
		got[me] = in[0]
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("each rank got its left neighbour's value:", got)
	// Output: each rank got its left neighbour's value: [30 0 10 20]
}

// Probe waits for a message without receiving it: its Status tells the
// source and the size, so the receiver can allocate the buffer before
// receiving. Use it when the sender decides the length.
func ExampleComm_Probe() {
	err := mpitest.RunErr(2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if w.Rank() == 1 {
			return w.Send([]byte("a message of a length rank 0 does not know"), 0, 5)
		}
		st, err := w.Probe(mpi.AnySource, 5)
		if err != nil {
			return err
		}
		buf := make([]byte, st.Count)
		if _, err := w.Recv(buf, st.Source, st.Tag); err != nil {
			return err
		}
		fmt.Printf("from rank %d, %d bytes: %s\n", st.Source, st.Count, buf)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: from rank 1, 42 bytes: a message of a length rank 0 does not know
}

// Improbe is the matched probe that does not wait: a loop can do other work
// until a message is there, and the message it took out of matching is
// received with Mrecv by this goroutine alone, even when other goroutines
// receive on the same communicator.
func ExampleComm_Improbe() {
	err := mpitest.RunErr(2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if w.Rank() == 1 {
			return mpi.Send(w, []float64{2.5, 4}, 0, 9)
		}
		for {
			msg, st, ok, err := w.Improbe(1, 9)
			if err != nil {
				return err
			}
			if !ok {
				continue // other work would go here
			}
			n, err := mpi.Count[float64](st)
			if err != nil {
				return err
			}
			vals := make([]float64, n)
			if _, err := mpi.Mrecv(w, vals, msg); err != nil {
				return err
			}
			fmt.Println("received", vals)
			return nil
		}
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: received [2.5 4]
}

// WaitallContext waits for requests until a context ends (for one request,
// Request.WaitContext does the same): a receive that may never come is
// given a deadline, and on timeout the request is still pending, so the
// program can decide (here: ask the peer, then wait again; or Cancel it).
func ExampleWaitallContext() {
	err := mpitest.RunErr(2, func(r *mpitest.Rank) error {
		w := r.CommWorld()
		if w.Rank() == 1 {
			// Rank 1 sends only when asked.
			if _, err := w.Recv(nil, 0, 1); err != nil {
				return err
			}
			return mpi.Send(w, []int32{42}, 0, 2)
		}
		answer := make([]int32, 1)
		req, err := mpi.Irecv(w, answer, 1, 2)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		err = mpi.WaitallContext(ctx, []*mpi.Request{req}, nil)
		fmt.Println("timed out:", errors.Is(err, context.DeadlineExceeded), mpi.ErrorClass(err) == mpi.ErrPending)
		if err := w.Send(nil, 1, 1); err != nil { // ask
			return err
		}
		if _, err := req.Wait(); err != nil { // the same request, still pending
			return err
		}
		fmt.Println("then got", answer[0])
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// timed out: true true
	// then got 42
}
