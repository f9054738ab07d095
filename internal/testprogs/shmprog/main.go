// Command shmprog drives the shared-memory BTL between real processes, for
// its tests: failures at chosen moments, flow control, and benchmarks. It
// talks to the BTL directly (the BML's first route to the peer) and prints
// what the tests look for.
//
//	shmprog setup               the last rank sleeps a minute before Init, so the others wait in Init with their segments made
//	shmprog transfer            ranks 0 and 1 stream fragments both ways; each prints "ready <rank> job <id>" once data flows, and goes on until killed
//	shmprog finalize            ranks 0 and 1 exchange; rank 0 then finalizes (and waits for rank 1), rank 1 prints "ready 1 job <id>" and sleeps
//	shmprog flood BYTES         rank 0 offers BYTES to rank 1, which sleeps 2 s first; both print their memory before and after
//	shmprog blocked-send        rank 0 fills its box to rank 1, which never progresses, and keeps sending until rank 1 dies; it prints the error
//	shmprog wait-recv           rank 0 waits in Progress for a fragment rank 1 never sends, until rank 1 dies; it prints the lost-peer callback
//	shmprog pingpong N BYTES    ranks 0 and 1 bounce a fragment N times; rank 0 prints "ns_per_oneway <x>"
//	shmprog stream N BYTES      rank 0 sends N messages of BYTES (as max_send_size fragments, or by Get with "get"), rank 1 acknowledges each; rank 0 prints "bytes_per_second <x>"
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gompi/gompi/frameworks/btl"
	"github.com/gompi/gompi/mpi"
)

const tag = btl.TagUser + 1

func die(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "shmprog: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	if len(os.Args) < 2 {
		die("no mode")
	}
	mode := os.Args[1]
	if mode == "setup" {
		// The last rank is late: the others made their control segments in
		// Query and wait for it in the modex fence.
		if r, _ := strconv.Atoi(os.Getenv("PMI_RANK")); r == mustAtoi(os.Getenv("PMI_SIZE"))-1 {
			time.Sleep(time.Minute)
		}
	}
	inst, err := mpi.Init()
	if err != nil {
		die("%v", err)
	}
	p := &prog{inst: inst, rank: inst.Rank(), bml: inst.BML()}
	p.bml.RegisterRecv(tag, p.receive)
	p.bml.RegisterError(func(rank int, err error) {
		p.lostRank.Store(int64(rank) + 1)
		p.lostMsg.Store(err.Error())
	})
	if err := inst.Runtime().Barrier(); err != nil {
		die("%v", err)
	}
	arg := func(i int) int {
		if len(os.Args) <= i {
			die("mode %s needs more arguments", mode)
		}
		return mustAtoi(os.Args[i])
	}
	switch mode {
	case "setup":
		fmt.Println("set up", p.rank)
	case "transfer":
		p.transfer()
	case "finalize":
		p.finalize()
	case "flood":
		p.flood(int64(arg(2)))
	case "blocked-send":
		p.blockedSend()
	case "wait-recv":
		p.waitRecv()
	case "pingpong":
		p.pingpong(arg(2), arg(3))
	case "stream":
		p.stream(arg(2), arg(3), len(os.Args) > 4 && os.Args[4] == "get")
	default:
		die("unknown mode %s", mode)
	}
	if err := inst.Finalize(); err != nil {
		die("%v", err)
	}
}

func mustAtoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		die("bad number %q", s)
	}
	return n
}

type prog struct {
	inst *mpi.Instance
	rank int
	bml  *btl.BML

	// Touched by the callback, which runs inside Progress on the goroutine
	// that calls it: this program's only goroutine.
	frags    int64
	bytes    int64
	seqOK    bool
	nextSeq  uint64
	badSeq   string
	keepLast bool // keep a copy of the last fragment (descriptions to Get)
	lastFrag []byte
	sink     []byte // when set, fragments are copied out into it, as a PML would
	sinkOff  int

	lostRank atomic.Int64 // rank+1 of the peer the error callback named
	lostMsg  atomic.Value
}

func (p *prog) receive(src int, _ btl.Tag, frag []byte) {
	p.frags++
	p.bytes += int64(len(frag))
	if len(frag) >= 8 {
		if seq := binary.LittleEndian.Uint64(frag); seq != p.nextSeq && p.badSeq == "" {
			p.badSeq = fmt.Sprintf("fragment %d arrived when %d was due", seq, p.nextSeq)
		}
		p.nextSeq++
	}
	if p.keepLast {
		p.lastFrag = append(p.lastFrag[:0], frag...)
	}
	if p.sink != nil {
		if p.sinkOff+len(frag) > len(p.sink) {
			p.sinkOff = 0
		}
		p.sinkOff += copy(p.sink[p.sinkOff:], frag)
	}
}

func (p *prog) route(peer int) btl.Route {
	r := p.bml.Peer(peer).Send[0]
	if r.Attr.Name != "shm" {
		die("rank %d reaches %d through %s, not shm", p.rank, peer, r.Attr.Name)
	}
	return r
}

// idle progresses and yields when nothing moved: ranks may outnumber cores.
func (p *prog) idle() {
	if p.bml.Progress() == 0 {
		runtime.Gosched()
	}
}

// send sends one fragment, progressing while the box is full.
func (p *prog) send(r btl.Route, frag []byte) error {
	for {
		err := r.Module.Send(r.EP, tag, nil, frag)
		if !errors.Is(err, btl.ErrWouldBlock) {
			return err
		}
		p.idle()
	}
}

func seqFrag(buf []byte, seq uint64) []byte {
	binary.LittleEndian.PutUint64(buf, seq)
	return buf
}

func (p *prog) transfer() {
	if p.rank > 1 {
		select {}
	}
	r := p.route(1 - p.rank)
	buf := make([]byte, 1000)
	ready := false
	for seq := uint64(0); ; seq++ {
		if err := p.send(r, seqFrag(buf, seq)); err != nil {
			die("send: %v", err)
		}
		p.idle()
		if p.badSeq != "" {
			die("%s", p.badSeq)
		}
		if !ready && p.frags >= 1000 {
			ready = true
			fmt.Printf("ready %d job %s\n", p.rank, p.inst.JobID())
		}
	}
}

func (p *prog) finalize() {
	if p.rank < 2 {
		r := p.route(1 - p.rank)
		buf := make([]byte, 100)
		for i := 0; i < 100; i++ {
			if err := p.send(r, seqFrag(buf, uint64(i))); err != nil {
				die("send: %v", err)
			}
		}
		for p.frags < 100 {
			p.idle()
		}
	}
	if p.rank == 1 {
		fmt.Printf("ready 1 job %s\n", p.inst.JobID())
		time.Sleep(time.Minute)
	}
}

// memory returns VmRSS and VmHWM in bytes.
func memory() (rss, hwm int64) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		die("%v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			hwm = n << 10
		}
	}
	return rss, hwm
}

func (p *prog) flood(total int64) {
	if p.rank > 1 {
		return
	}
	peer := 1 - p.rank
	r := p.route(peer)
	fmt.Printf("flood job %s\n", p.inst.JobID())
	rss0, _ := memory()
	start := time.Now()
	if p.rank == 0 {
		buf := make([]byte, r.Attr.MaxSendSize)
		var blocked int
		seq := uint64(0)
		for sent := int64(0); sent < total; seq++ {
			frag := seqFrag(buf[:min(int64(len(buf)), total-sent)], seq)
			for {
				err := r.Module.Send(r.EP, tag, nil, frag)
				if err == nil {
					break
				}
				if !errors.Is(err, btl.ErrWouldBlock) {
					die("send: %v", err)
				}
				blocked++
				p.idle()
			}
			sent += int64(len(frag))
		}
		// Wait for the receiver's acknowledgement.
		for p.frags == 0 {
			p.idle()
		}
		fmt.Printf("flood sender: %d bytes in %d fragments, %d refused sends, %v\n", total, seq, blocked, time.Since(start).Round(time.Millisecond))
	} else {
		time.Sleep(2 * time.Second)
		for p.bytes < total {
			p.idle()
			if p.badSeq != "" {
				die("%s", p.badSeq)
			}
		}
		if err := p.send(r, make([]byte, 8)); err != nil {
			die("send: %v", err)
		}
		fmt.Printf("flood receiver: %d bytes in %d fragments\n", p.bytes, p.frags)
	}
	rss1, hwm := memory()
	fmt.Printf("memory rank %d: rss_before %d rss_after %d hwm %d\n", p.rank, rss0, rss1, hwm)
}

func (p *prog) blockedSend() {
	if p.rank != 0 {
		if p.rank == 1 {
			fmt.Println("ready 1")
		}
		time.Sleep(time.Minute)
		return
	}
	r := p.route(1)
	buf := make([]byte, 1000)
	announced := false
	for {
		err := r.Module.Send(r.EP, tag, nil, buf)
		if err == nil {
			continue
		}
		if errors.Is(err, btl.ErrWouldBlock) {
			if !announced {
				announced = true
				fmt.Println("blocked 0")
			}
			p.idle()
			continue
		}
		fmt.Printf("send error: peer_lost=%v: %v\n", errors.Is(err, btl.ErrPeerLost), err)
		break
	}
	p.awaitLost()
}

func (p *prog) waitRecv() {
	if p.rank != 0 {
		if p.rank == 1 {
			fmt.Println("ready 1")
		}
		time.Sleep(time.Minute)
		return
	}
	fmt.Println("waiting 0")
	p.awaitLost()
}

// awaitLost progresses until the error callback names a peer, prints it,
// releases the BTLs (which removes any file a dead peer did not) and exits:
// Finalize would wait for the dead peer.
func (p *prog) awaitLost() {
	deadline := time.Now().Add(20 * time.Second)
	for p.lostRank.Load() == 0 {
		if time.Now().After(deadline) {
			die("no lost-peer callback")
		}
		p.idle()
	}
	fmt.Printf("lost callback: rank %d: %v\n", p.lostRank.Load()-1, p.lostMsg.Load())
	if err := p.bml.Finalize(); err != nil {
		die("%v", err)
	}
	os.Exit(0)
}

func (p *prog) pingpong(n, size int) {
	if p.rank > 1 {
		return
	}
	r := p.route(1 - p.rank)
	buf := make([]byte, size)
	for _, warm := range []bool{true, false} {
		iters := n
		if warm {
			iters = min(n, 1000)
		}
		p.frags = 0
		start := time.Now()
		for i := 0; i < iters; i++ {
			if p.rank == 0 {
				if err := p.send(r, buf); err != nil {
					die("send: %v", err)
				}
			}
			for p.frags <= int64(i) {
				p.idle()
			}
			if p.rank == 1 {
				if err := p.send(r, buf); err != nil {
					die("send: %v", err)
				}
			}
		}
		if !warm && p.rank == 0 {
			fmt.Printf("ns_per_oneway %.1f\n", float64(time.Since(start).Nanoseconds())/float64(2*iters))
		}
	}
}

func (p *prog) stream(n, size int, get bool) {
	if p.rank > 1 {
		return
	}
	r := p.route(1 - p.rank)
	if get && len(p.bml.Peer(1-p.rank).RDMA) == 0 {
		die("no single-copy route")
	}
	room := r.Attr.MaxSendSize
	p.keepLast = get
	buf := make([]byte, size)
	if !get && p.rank == 1 {
		p.sink = buf
	}
	for i := range buf {
		buf[i] = byte(i)
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if p.rank == 0 {
			if get {
				desc := r.Module.(btl.RDMA).Expose(buf)
				if err := p.send(r, desc); err != nil {
					die("send: %v", err)
				}
			} else {
				for off := 0; off < size; off += room {
					if err := p.send(r, buf[off:min(off+room, size)]); err != nil {
						die("send: %v", err)
					}
				}
			}
			for p.frags <= int64(i) {
				p.idle()
			}
		} else {
			var got int
			for got < size {
				before := p.frags
				p.idle()
				if p.frags > before {
					if get {
						desc := p.lastFrag
						if err := r.Module.(btl.RDMA).Get(r.EP, desc, 0, buf); err != nil {
							die("get: %v", err)
						}
						got = size
					} else {
						got = int(p.bytes) - i*size
					}
				}
			}
			if err := p.send(r, make([]byte, 8)); err != nil {
				die("send: %v", err)
			}
		}
	}
	runtime.KeepAlive(buf)
	if p.rank == 0 {
		fmt.Printf("bytes_per_second %.0f\n", float64(n)*float64(size)/time.Since(start).Seconds())
	}
}
