package collcheck

import "github.com/gompi/gompi/mpi"

// forms are one collective call in its three forms: blocking (Allreduce),
// nonblocking (Iallreduce) and persistent (AllreduceInit), on the same
// arguments. name is the blocking form's name.
type forms struct {
	name     string
	blocking func() error
	start    func() (*mpi.Request, error)
	init     func() (*mpi.Request, error)
}

// nbName is the nonblocking form's name, as errors give it: "Iallreduce".
func (f forms) nbName() string { return "I" + string(f.name[0]-'A'+'a') + f.name[1:] }

// initName is the persistent form's name: "AllreduceInit".
func (f forms) initName() string { return f.name + "Init" }

type reqFn = func() (*mpi.Request, error)

func barrierF(c *mpi.Comm) forms {
	return forms{"Barrier", c.Barrier, c.Ibarrier, c.BarrierInit}
}

func bcastF[T mpi.Elem](c *mpi.Comm, buf []T, root int) forms {
	return forms{"Bcast",
		func() error { return mpi.Bcast(c, buf, root) },
		func() (*mpi.Request, error) { return mpi.Ibcast(c, buf, root) },
		func() (*mpi.Request, error) { return mpi.BcastInit(c, buf, root) }}
}

func reduceF[T mpi.Elem](c *mpi.Comm, send, recv []T, op *mpi.Op, root int) forms {
	return forms{"Reduce",
		func() error { return mpi.Reduce(c, send, recv, op, root) },
		func() (*mpi.Request, error) { return mpi.Ireduce(c, send, recv, op, root) },
		func() (*mpi.Request, error) { return mpi.ReduceInit(c, send, recv, op, root) }}
}

func allreduceF[T mpi.Elem](c *mpi.Comm, send, recv []T, op *mpi.Op) forms {
	return forms{"Allreduce",
		func() error { return mpi.Allreduce(c, send, recv, op) },
		func() (*mpi.Request, error) { return mpi.Iallreduce(c, send, recv, op) },
		func() (*mpi.Request, error) { return mpi.AllreduceInit(c, send, recv, op) }}
}

func scanF[T mpi.Elem](c *mpi.Comm, send, recv []T, op *mpi.Op) forms {
	return forms{"Scan",
		func() error { return mpi.Scan(c, send, recv, op) },
		func() (*mpi.Request, error) { return mpi.Iscan(c, send, recv, op) },
		func() (*mpi.Request, error) { return mpi.ScanInit(c, send, recv, op) }}
}

func exscanF[T mpi.Elem](c *mpi.Comm, send, recv []T, op *mpi.Op) forms {
	return forms{"Exscan",
		func() error { return mpi.Exscan(c, send, recv, op) },
		func() (*mpi.Request, error) { return mpi.Iexscan(c, send, recv, op) },
		func() (*mpi.Request, error) { return mpi.ExscanInit(c, send, recv, op) }}
}

func gatherF[T mpi.Elem](c *mpi.Comm, send, recv []T, root int) forms {
	return forms{"Gather",
		func() error { return mpi.Gather(c, send, recv, root) },
		func() (*mpi.Request, error) { return mpi.Igather(c, send, recv, root) },
		func() (*mpi.Request, error) { return mpi.GatherInit(c, send, recv, root) }}
}

func gathervF[T mpi.Elem](c *mpi.Comm, send, recv []T, counts, displs []int, root int) forms {
	return forms{"Gatherv",
		func() error { return mpi.Gatherv(c, send, recv, counts, displs, root) },
		func() (*mpi.Request, error) { return mpi.Igatherv(c, send, recv, counts, displs, root) },
		func() (*mpi.Request, error) { return mpi.GathervInit(c, send, recv, counts, displs, root) }}
}

func scatterF[T mpi.Elem](c *mpi.Comm, send, recv []T, root int) forms {
	return forms{"Scatter",
		func() error { return mpi.Scatter(c, send, recv, root) },
		func() (*mpi.Request, error) { return mpi.Iscatter(c, send, recv, root) },
		func() (*mpi.Request, error) { return mpi.ScatterInit(c, send, recv, root) }}
}

func scattervF[T mpi.Elem](c *mpi.Comm, send []T, counts, displs []int, recv []T, root int) forms {
	return forms{"Scatterv",
		func() error { return mpi.Scatterv(c, send, counts, displs, recv, root) },
		func() (*mpi.Request, error) { return mpi.Iscatterv(c, send, counts, displs, recv, root) },
		func() (*mpi.Request, error) { return mpi.ScattervInit(c, send, counts, displs, recv, root) }}
}

func allgatherF[T mpi.Elem](c *mpi.Comm, send, recv []T) forms {
	return forms{"Allgather",
		func() error { return mpi.Allgather(c, send, recv) },
		func() (*mpi.Request, error) { return mpi.Iallgather(c, send, recv) },
		func() (*mpi.Request, error) { return mpi.AllgatherInit(c, send, recv) }}
}

func allgathervF[T mpi.Elem](c *mpi.Comm, send, recv []T, counts, displs []int) forms {
	return forms{"Allgatherv",
		func() error { return mpi.Allgatherv(c, send, recv, counts, displs) },
		func() (*mpi.Request, error) { return mpi.Iallgatherv(c, send, recv, counts, displs) },
		func() (*mpi.Request, error) { return mpi.AllgathervInit(c, send, recv, counts, displs) }}
}

func alltoallF[T mpi.Elem](c *mpi.Comm, send, recv []T) forms {
	return forms{"Alltoall",
		func() error { return mpi.Alltoall(c, send, recv) },
		func() (*mpi.Request, error) { return mpi.Ialltoall(c, send, recv) },
		func() (*mpi.Request, error) { return mpi.AlltoallInit(c, send, recv) }}
}

func alltoallvF[T mpi.Elem](c *mpi.Comm, send []T, sc, sd []int, recv []T, rc, rd []int) forms {
	return forms{"Alltoallv",
		func() error { return mpi.Alltoallv(c, send, sc, sd, recv, rc, rd) },
		func() (*mpi.Request, error) { return mpi.Ialltoallv(c, send, sc, sd, recv, rc, rd) },
		func() (*mpi.Request, error) { return mpi.AlltoallvInit(c, send, sc, sd, recv, rc, rd) }}
}

func reduceScatterBlockF[T mpi.Elem](c *mpi.Comm, send, recv []T, op *mpi.Op) forms {
	return forms{"ReduceScatterBlock",
		func() error { return mpi.ReduceScatterBlock(c, send, recv, op) },
		func() (*mpi.Request, error) { return mpi.IreduceScatterBlock(c, send, recv, op) },
		func() (*mpi.Request, error) { return mpi.ReduceScatterBlockInit(c, send, recv, op) }}
}

func reduceScatterF[T mpi.Elem](c *mpi.Comm, send, recv []T, counts []int, op *mpi.Op) forms {
	return forms{"ReduceScatter",
		func() error { return mpi.ReduceScatter(c, send, recv, counts, op) },
		func() (*mpi.Request, error) { return mpi.IreduceScatter(c, send, recv, counts, op) },
		func() (*mpi.Request, error) { return mpi.ReduceScatterInit(c, send, recv, counts, op) }}
}
