package mpi_test

import (
	"fmt"
	"log"

	"github.com/gompi/gompi/mpi"
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
