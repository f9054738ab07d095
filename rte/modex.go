package rte

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/gompi/gompi/mca"
	"github.com/gompi/gompi/mpierr"
	"github.com/gompi/gompi/rte/handshakes"
)

// Modex exchanges business cards: data that components publish before they
// can talk (addresses, segment names), read by their peers after a Fence.
//
//   - PutProc publishes data of this process; GetProc reads a process's.
//   - PutNode publishes data for this process's whole node; GetNode reads the
//     node data of a rank's node. When several processes of a node put the
//     same key, the first to reach the node's leader wins (the leader's own
//     comes first) and the others' values are dropped, logged at
//     rte_base_verbose 10.
//   - Fence is collective: it publishes what was put since the last fence
//     and makes it readable by all.
//
// On the wire, each node's leader (its lowest rank) gathers the records of
// its node over a cookie-checked local socket and publishes them in one
// compact blob (see modexwire.go), so that the PMI traffic grows with the
// number of nodes, and key names are sent once per node, not per process.
type Modex struct {
	rt *Runtime

	mu          sync.Mutex
	pendingProc map[string][]byte
	pendingNode map[string][]byte
	fences      int                 // completed fences
	nodes       map[int]*nodeBlob   // merged data per node index
	fetched     map[int]int         // per node, fences already fetched
	wire        map[int]*ModexStats // per fence, what this leader published
}

func newModex(rt *Runtime) *Modex {
	return &Modex{
		rt: rt, pendingProc: map[string][]byte{}, pendingNode: map[string][]byte{},
		nodes: map[int]*nodeBlob{}, fetched: map[int]int{}, wire: map[int]*ModexStats{},
	}
}

func checkKey(key string) error {
	if !validKey(key) {
		return mpierr.Errorf(mpierr.ErrArg, "modex: invalid key %q: use 1 to 64 letters, digits, '.', '-' or '_'", key)
	}
	return nil
}

// PutProc publishes a value of this process under key at the next Fence. A
// later PutProc of the same key before the fence replaces it.
func (m *Modex) PutProc(key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	m.pendingProc[key] = append([]byte(nil), value...)
	m.mu.Unlock()
	return nil
}

// PutNode publishes a value for this process's node under key at the next
// Fence.
func (m *Modex) PutNode(key string, value []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	m.pendingNode[key] = append([]byte(nil), value...)
	m.mu.Unlock()
	return nil
}

// ErrNotFound is wrapped by GetProc and GetNode when no value was published.
var ErrNotFound = mpierr.Errorf(mpierr.ErrName, "modex: no such value")

// GetProc returns the value rank published under key before the last Fence.
func (m *Modex) GetProc(rank int, key string) ([]byte, error) {
	nb, err := m.nodeData(rank)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := nb.procs[rank][key]
	if !ok {
		return nil, fmt.Errorf("rank %d published no %q: %w", rank, key, ErrNotFound)
	}
	return append([]byte(nil), v...), nil
}

// GetNode returns the value published for rank's node under key before the
// last Fence.
func (m *Modex) GetNode(rank int, key string) ([]byte, error) {
	nb, err := m.nodeData(rank)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := nb.node[key]
	if !ok {
		return nil, fmt.Errorf("node of rank %d has no %q: %w", rank, key, ErrNotFound)
	}
	return append([]byte(nil), v...), nil
}

// nodeData fetches, once per fence, the blobs of rank's node.
func (m *Modex) nodeData(rank int) (*nodeBlob, error) {
	j := m.rt.Job()
	if rank < 0 || rank >= j.Size {
		return nil, mpierr.Errorf(mpierr.ErrRank, "modex: rank %d is not in 0..%d", rank, j.Size-1)
	}
	node := j.NodeOf[rank]
	m.mu.Lock()
	fences, have := m.fences, m.fetched[node]
	m.mu.Unlock()
	for seq := have; seq < fences; seq++ {
		nb, err := m.fetch(seq, node)
		if err != nil {
			return nil, err
		}
		m.mu.Lock()
		cur := m.nodes[node]
		if cur == nil {
			cur = &nodeBlob{node: map[string][]byte{}, procs: map[int]map[string][]byte{}}
			m.nodes[node] = cur
		}
		for k, v := range nb.node {
			cur.node[k] = v
		}
		for r, vals := range nb.procs {
			if cur.procs[r] == nil {
				cur.procs[r] = map[string][]byte{}
			}
			for k, v := range vals {
				cur.procs[r][k] = v
			}
		}
		if m.fetched[node] < seq+1 {
			m.fetched[node] = seq + 1
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	nb := m.nodes[node]
	if nb == nil {
		nb = &nodeBlob{node: map[string][]byte{}, procs: map[int]map[string][]byte{}}
	}
	return nb, nil
}

// fetch reads and decodes one node's blob of one fence from PMI.
func (m *Modex) fetch(seq, node int) (nodeBlob, error) {
	c := m.rt.pmi
	first, found, err := c.Get(chunkKey(seq, node, 0))
	if err != nil {
		return nodeBlob{}, err
	}
	if !found {
		return nodeBlob{}, nil // the node had nothing to publish at this fence
	}
	text, _, err := joinChunks(first, node, func(i int) (string, bool, error) { return c.Get(chunkKey(seq, node, i)) })
	if err != nil {
		return nodeBlob{}, err
	}
	return decodeBlob(text)
}

// Fence publishes what this process put since the last fence and waits for
// every process of the job to do the same. It is collective.
func (m *Modex) Fence(ctx context.Context) error {
	j := m.rt.Job()
	m.mu.Lock()
	rec := record{rank: j.Rank, proc: m.pendingProc, node: m.pendingNode}
	m.pendingProc, m.pendingNode = map[string][]byte{}, map[string][]byte{}
	seq := m.fences
	m.mu.Unlock()

	local := j.LocalRanks(j.NodeIndex)
	if local[0] == j.Rank {
		records := []record{rec}
		if len(local) > 1 {
			more, err := m.gather(ctx, seq, local)
			if err != nil {
				return err
			}
			records = append(records, more...)
		}
		if err := m.publish(seq, records); err != nil {
			return err
		}
	} else if err := m.sendToLeader(ctx, seq, local[0], rec); err != nil {
		return err
	}
	if err := m.rt.pmi.Barrier(); err != nil {
		return err
	}
	m.mu.Lock()
	m.fences = seq + 1
	m.mu.Unlock()
	return nil
}

// publish merges a node's records and puts the blob.
func (m *Modex) publish(seq int, records []record) error {
	log := m.rt.logger()
	nb := nodeBlob{node: map[string][]byte{}, procs: map[int]map[string][]byte{}}
	owner := map[string]int{}
	for _, r := range records {
		for k, v := range r.node {
			if first, taken := owner[k]; taken {
				if log != nil {
					log.Log(mca.VerboseComponent, "modex: node value dropped; an earlier process of the node put the key first",
						"key", k, "rank", r.rank, "kept_rank", first)
				}
				continue
			}
			owner[k] = r.rank
			nb.node[k] = v
		}
		nb.procs[r.rank] = r.proc
	}
	st := statsOf(nb)
	if st.Entries == 0 {
		// Nothing to say: readers take a missing blob for an empty one, so
		// an empty fence (Init's, say) costs no put at all.
		return nil
	}
	blob := encodeBlob(nb)
	chunks := splitChunks(blob, m.rt.pmi.MaxValue-1)
	before := m.rt.pmi.BytesWritten()
	for i, ch := range chunks {
		if err := m.rt.pmi.Put(chunkKey(seq, m.rt.job.NodeIndex, i), ch); err != nil {
			return err
		}
	}
	st.Puts = len(chunks)
	st.WireBytes = m.rt.pmi.BytesWritten() - before
	m.mu.Lock()
	m.wire[seq] = &st
	m.mu.Unlock()
	if log != nil && log.V(mca.VerboseInfo) {
		log.Log(mca.VerboseInfo, "modex: published node data", "fence", seq, "processes", st.Processes,
			"entries", st.Entries, "value_bytes", st.ValueBytes, "wire_bytes", st.WireBytes, "puts", st.Puts)
	}
	return nil
}

// Published returns what this process published as its node's leader at a
// fence (nil when it is not a leader).
func (m *Modex) Published(seq int) *ModexStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.wire[seq]
}

// ModexStats describe a published blob.
type ModexStats struct {
	Processes  int   // records
	Entries    int   // values, process and node
	Keys       int   // distinct key names
	ValueBytes int64 // raw bytes of the values
	WireBytes  int64 // bytes of the put lines on the PMI wire
	Puts       int
}

func statsOf(nb nodeBlob) ModexStats {
	st := ModexStats{Processes: len(nb.procs)}
	names := map[string]bool{}
	add := func(vals map[string][]byte) {
		for k, v := range vals {
			st.Entries++
			st.ValueBytes += int64(len(v))
			names[k] = true
		}
	}
	add(nb.node)
	for _, vals := range nb.procs {
		add(vals)
	}
	st.Keys = len(names)
	return st
}

// StatsOfBlobs decodes the chunks a server saw put under one fence's keys
// and totals them; mpirun uses it for --report-modex. chunks maps each key to
// its value.
func StatsOfBlobs(chunks map[string]string) (ModexStats, error) {
	var total ModexStats
	byNode := map[[2]int]bool{}
	for k := range chunks {
		var seq, node, i int
		if _, err := fmt.Sscanf(k, "m%d.%d.%d", &seq, &node, &i); err == nil && chunkKey(seq, node, i) == k && i == 0 {
			byNode[[2]int{seq, node}] = true
		}
	}
	keys := make([][2]int, 0, len(byNode))
	for sn := range byNode {
		keys = append(keys, sn)
	}
	sort.Slice(keys, func(a, b int) bool {
		return keys[a][0] < keys[b][0] || keys[a][0] == keys[b][0] && keys[a][1] < keys[b][1]
	})
	for _, sn := range keys {
		text, n, err := joinChunks(chunks[chunkKey(sn[0], sn[1], 0)], sn[1], func(i int) (string, bool, error) {
			part, ok := chunks[chunkKey(sn[0], sn[1], i)]
			return part, ok, nil
		})
		if err != nil {
			return total, err
		}
		nb, err := decodeBlob(text)
		if err != nil {
			return total, err
		}
		st := statsOf(nb)
		total.Processes += st.Processes
		total.Entries += st.Entries
		total.ValueBytes += st.ValueBytes
		total.Puts += n
		if st.Keys > total.Keys {
			total.Keys = st.Keys
		}
	}
	return total, nil
}

// NamingOverhead is (wire bytes − value bytes) / entries: the bytes the
// modex spends per key and process on everything but the values.
func (s ModexStats) NamingOverhead() float64 {
	if s.Entries == 0 {
		return 0
	}
	return float64(s.WireBytes-s.ValueBytes) / float64(s.Entries)
}

// The local gather: non-leaders send their record to their node's leader
// over an abstract Unix socket (Linux; no file to clean up), presenting the
// job cookie first.

func (m *Modex) socketName(seq int) string {
	return fmt.Sprintf("@gompi-%s-modex-%d-%d", m.rt.job.ID, m.rt.job.NodeIndex, seq)
}

const maxRecord = 64 << 20

// modexHandshakeTimeout is how long a connection to the node socket has to
// present the job cookie and the record's header; the record itself then
// has recordTimeout. Anyone on the host may connect: a stranger's
// connection must not hold the leader's descriptors, nor the gather.
var modexHandshakeTimeout = 5 * time.Second

const recordTimeout = 10 * time.Second

// gathered is what reading one connection gave.
type gathered struct {
	rec record
	err error
}

// gather receives the records of the node's other processes. Connections
// are read concurrently, each bounded in time (handshakes), so that a silent
// or slow stranger delays nobody.
func (m *Modex) gather(ctx context.Context, seq int, local []int) ([]record, error) {
	ln, err := net.Listen("unix", m.socketName(seq))
	if err != nil {
		return nil, mpierr.Errorf(mpierr.ErrIntern, "modex: node leader cannot listen: %w", err)
	}
	// Stop waiting when the caller gives up or the job ends.
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	hs := handshakes.New(0, modexHandshakeTimeout)
	defer hs.Close()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-m.rt.Lost():
			ln.Close()
		case <-done:
		}
	}()
	results := make(chan gathered)
	acceptErr := make(chan error, 1)
	go func() {
		for hs.Room(done) {
			conn, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			if !hs.Add(conn) {
				return
			}
			go func() {
				rec, err := m.readRecord(conn, hs)
				conn.Close()
				select {
				case results <- gathered{rec, err}:
				case <-done:
				}
			}()
		}
	}()
	expected := map[int]bool{}
	for _, r := range local[1:] {
		expected[r] = true
	}
	var out []record
	for len(expected) > 0 {
		var g gathered
		select {
		case g = <-results:
		case err := <-acceptErr:
			if ctx.Err() != nil {
				return nil, fmt.Errorf("modex: gathering the node's records: %w", context.Cause(ctx))
			}
			select {
			case <-m.rt.Lost():
				return nil, fmt.Errorf("modex: gathering the node's records: %w", ErrJobLost)
			default:
			}
			return nil, mpierr.Errorf(mpierr.ErrIntern, "modex: accept: %w", err)
		}
		if g.err != nil {
			if log := m.rt.logger(); log != nil {
				log.Log(mca.VerboseComponent, "modex: rejected a local connection", "reason", g.err.Error())
			}
			continue
		}
		if !expected[g.rec.rank] {
			if log := m.rt.logger(); log != nil {
				log.Log(mca.VerboseComponent, "modex: rejected a record from a rank not expected on this node", "rank", g.rec.rank)
			}
			continue
		}
		delete(expected, g.rec.rank)
		out = append(out, g.rec)
	}
	return out, nil
}

// ErrJobLost is wrapped when the job ended (abort, launcher gone) during an
// operation.
var ErrJobLost = mpierr.Errorf(mpierr.ErrProcAborted, "rte: the job ended")

// readRecord reads one record: the cookie and header within the handshake
// timeout (set by hs.Add), the body within recordTimeout.
func (m *Modex) readRecord(conn net.Conn, hs *handshakes.Set) (record, error) {
	var hdr [CookieLen + 8]byte
	_, err := io.ReadFull(conn, hdr[:])
	if !hs.Done(conn) && err == nil {
		err = errors.New("closed to make room")
	}
	if err != nil {
		return record{}, fmt.Errorf("short header: %v", err)
	}
	if !m.rt.job.CheckCookie(hdr[:CookieLen]) {
		return record{}, errors.New("wrong cookie")
	}
	conn.SetDeadline(time.Now().Add(recordTimeout))
	rank := int(binary.BigEndian.Uint32(hdr[CookieLen:]))
	n := binary.BigEndian.Uint32(hdr[CookieLen+4:])
	if n > maxRecord {
		return record{}, fmt.Errorf("record of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(conn, body); err != nil {
		return record{}, fmt.Errorf("short record: %v", err)
	}
	return decodeRecord(rank, body)
}

// decodeRecord reads the body of a record whose header says it is rank's:
// the blob of one process, from any local process that has the cookie. Its
// errors are ErrIntern.
func decodeRecord(rank int, body []byte) (record, error) {
	nb, err := decodeBlob(string(body))
	if err != nil {
		return record{}, err
	}
	if len(nb.procs) != 1 {
		return record{}, mpierr.Errorf(mpierr.ErrIntern, "a record holds one process, not %d", len(nb.procs))
	}
	proc, ok := nb.procs[rank]
	if !ok {
		return record{}, mpierr.Errorf(mpierr.ErrIntern, "record of another rank than %d", rank)
	}
	return record{rank: rank, proc: proc, node: nb.node}, nil
}

// sendToLeader delivers this process's record, retrying until the leader
// listens.
func (m *Modex) sendToLeader(ctx context.Context, seq, leader int, rec record) error {
	body := encodeBlob(nodeBlob{node: rec.node, procs: map[int]map[string][]byte{rec.rank: rec.proc}})
	msg := make([]byte, CookieLen+8, CookieLen+8+len(body))
	copy(msg, m.rt.job.Cookie[:])
	binary.BigEndian.PutUint32(msg[CookieLen:], uint32(rec.rank))
	binary.BigEndian.PutUint32(msg[CookieLen+4:], uint32(len(body)))
	msg = append(msg, body...)
	name := m.socketName(seq)
	wait := 20 * time.Microsecond
	for {
		conn, err := net.Dial("unix", name)
		if err == nil {
			_, err = conn.Write(msg)
			conn.Close()
			if err != nil {
				return mpierr.Errorf(mpierr.ErrIntern, "modex: sending to node leader rank %d: %w", leader, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("modex: waiting for node leader rank %d: %w", leader, context.Cause(ctx))
		case <-m.rt.Lost():
			return fmt.Errorf("modex: waiting for node leader rank %d: %w", leader, ErrJobLost)
		case <-time.After(wait):
		}
		if wait < 2*time.Millisecond {
			wait *= 2
		}
	}
}
