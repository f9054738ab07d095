// Package release publishes a word to another core, or another process
// sharing memory, without the full fence of sync/atomic's stores.
//
// On amd64, sync/atomic's Store is a locked exchange: before it completes,
// every store ahead of it must reach the cache, and a store to a line that
// the reading core holds waits for that core to give the line up (~60 ns on
// this project's machines, far more across sockets). A producer that writes
// a message into a shared ring and then publishes it with atomic.Store
// therefore waits a whole cache-line round trip per message. x86 keeps
// stores in order (TSO), so a plain store after the message's stores
// publishes it just as well, and lets the core go on while the lines move:
// what Open MPI's shared-memory transports do (a write barrier that is only
// a compiler barrier on x86).
//
// Store is that plain store on amd64, a Go store through the word's
// address, which inlines. The Go compiler keeps a goroutine's memory
// operations in program order around a store: every store and load is
// chained to the memory state the one before it left (its SSA form), and a
// load of the state a store replaces is scheduled before that store. So
// nothing written or read before Store moves after it, and nothing after it
// moves before it, as with the assembly function it used to be, whose call
// (and the register spills of calling an assembly function) cost a windowed
// receiver 8 % of its rate: it runs five or so per message (unlocks, pool
// marks, a ring's tail). Elsewhere, and under the race detector (which must
// see the publication to order the accesses around it), it is
// atomic.Uint64.Store. The reader loads the word with atomic.Uint64.Load
// (a plain load on amd64), which orders the loads after it.
package release
