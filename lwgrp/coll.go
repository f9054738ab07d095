package lwgrp

import (
	"encoding/binary"
	"fmt"

	"github.com/gompi/gompi/datatype"
	"github.com/gompi/gompi/frameworks/pml"
	"github.com/gompi/gompi/mpierr"
)

// Op and the predefined ops are datatype's.
type Op = datatype.Op

// The collectives run on a LogRing (every hop wraps, so any member reaches
// any member 2^d away) unless noted; Allreduce, Reduce, Scan and Exscan
// need only the hops of a LogChain. Every member of the group calls each
// one with the same tag and root; counts must match as MPI's do.

// group is what the algorithms read of a LogChain or LogRing.
type group = LogChain

// chainOK refuses a nil or freed group and a bad tag: errors, never a
// nil dereference.
func chainOK(op string, l *LogChain, tag int) error {
	if l == nil || l.t == nil {
		return mpierr.Errorf(mpierr.ErrGroup, "lwgrp: %s: the group is nil or freed", op)
	}
	return checkTag(op, tag)
}

// ringOf is chainOK for a LogRing, returning the ring's chain.
func ringOf(op string, r *LogRing, tag int) (*group, error) {
	if r == nil {
		return nil, mpierr.Errorf(mpierr.ErrGroup, "lwgrp: %s: the group is nil or freed", op)
	}
	if err := chainOK(op, &r.LogChain, tag); err != nil {
		return nil, err
	}
	return &r.LogChain, nil
}

// at is the parent rank of the member dist hops right (left if negative)
// of this one; dist must be ± a power of two below the group's size.
func (l *group) at(dist int) int {
	if dist == 0 {
		return l.t.Rank()
	}
	d, neg := 0, dist < 0
	if neg {
		dist = -dist
	}
	for 1<<d < dist {
		d++
	}
	if neg {
		return hop(l.left, d)
	}
	return hop(l.right, d)
}

func wrapErr(op string, l *group, err error) error {
	return fmt.Errorf("lwgrp: %s (rank %d of %d): %w", op, l.rank, l.size, err)
}

func (l *group) sendrecv(send []byte, dst int, recv []byte, src, tag int) error {
	st, err := l.t.Sendrecv(send, dst, tag, recv, src, tag)
	if err != nil {
		return err
	}
	return pml.Exactly(st.Count, len(recv), src)
}

func (l *group) recv(buf []byte, src, tag int) error {
	st, err := l.t.Recv(buf, src, tag)
	if err != nil {
		return err
	}
	return pml.Exactly(st.Count, len(buf), src)
}

// Barrier is the dissemination barrier: in round d every member signals
// the one 2^d to its right and hears from the one 2^d to its left:
// ⌈log2 n⌉ rounds.
func (r *LogRing) Barrier(tag int) error {
	l, err := ringOf("Barrier", r, tag)
	if err != nil {
		return err
	}
	for d := range l.right {
		if err := l.sendrecv(nil, l.right[d], nil, l.left[d], tag); err != nil {
			return wrapErr("Barrier", l, err)
		}
	}
	return nil
}

func checkRoot(op string, l *group, root int) error {
	if root < 0 || root >= l.size {
		return mpierr.Errorf(mpierr.ErrRoot, "lwgrp: %s: root %d: accepted: 0 to %d", op, root, l.size-1)
	}
	return nil
}

// Bcast sends the root's buf to every member's buf down a binomial tree
// rooted at the root: ⌈log2 n⌉ rounds.
func Bcast[T datatype.Elem](r *LogRing, buf []T, root, tag int) error {
	l, err := ringOf("Bcast", r, tag)
	if err != nil {
		return err
	}
	if err := checkRoot("Bcast", l, root); err != nil {
		return err
	}
	if err := bcastBytes(l, datatype.Bytes(buf), root, tag); err != nil {
		return wrapErr("Bcast", l, err)
	}
	return nil
}

func bcastBytes(l *group, b []byte, root, tag int) error {
	n := l.size
	vr := (l.rank - root + n) % n
	mask := 1
	for ; mask < n; mask <<= 1 {
		if vr&mask != 0 {
			if err := l.recv(b, l.at(-mask), tag); err != nil {
				return err
			}
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if vr+mask < n {
			if err := l.t.Send(b, l.at(mask), tag); err != nil {
				return err
			}
		}
	}
	return nil
}

// Allreduce combines every member's send, element by element in rank
// order (so a non-commutative op is fine), into every member's recv; send
// and recv may be the same slice. Recursive doubling on the largest power
// of two p of members: member p+i first hands its data to member i, which
// keeps it apart from its own (the two runs stay contiguous in rank
// order), and gets the result back at the end: log2 n rounds on a power of
// two, otherwise the hand-over and the hand-back around ⌈log2 n⌉-1
// doubling rounds: ⌈log2 n⌉+1 at most. It needs only LogChain hops.
func Allreduce[T datatype.Elem](l *LogChain, send, recv []T, op *Op, tag int) error {
	if err := chainOK("Allreduce", l, tag); err != nil {
		return err
	}
	red, err := datatype.ReducerFor[T](op)
	if err != nil {
		return wrapErr("Allreduce", l, err)
	}
	if len(send) != len(recv) {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Allreduce: %d elements to send, %d to receive", len(send), len(recv))
	}
	if err := allreduceBytes(l, datatype.Bytes(send), datatype.Bytes(recv), red, tag, -1); err != nil {
		return wrapErr("Allreduce", l, err)
	}
	return nil
}

// Reduce is Allreduce with the result kept at root only (as lwgrp's).
func Reduce[T datatype.Elem](l *LogChain, send, recv []T, op *Op, root, tag int) error {
	if err := chainOK("Reduce", l, tag); err != nil {
		return err
	}
	if err := checkRoot("Reduce", l, root); err != nil {
		return err
	}
	red, err := datatype.ReducerFor[T](op)
	if err != nil {
		return wrapErr("Reduce", l, err)
	}
	if l.rank == root && len(send) != len(recv) {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Reduce: %d elements to send, %d to receive at the root", len(send), len(recv))
	}
	out := make([]byte, len(datatype.Bytes(send)))
	if err := allreduceBytes(l, datatype.Bytes(send), out, red, tag, root); err != nil {
		return wrapErr("Reduce", l, err)
	}
	if l.rank == root {
		datatype.CopyCached(datatype.Bytes(recv), out)
	}
	return nil
}

// part is a member's two runs during the allreduce: lo, its own run of
// ranks below p, and hi, the matching run of ranks p and above (empty
// where there is none).
type part struct {
	lo, hi []byte
	hasHi  bool
}

// encode is [hasHi][lo][hi].
func (p *part) encode(buf []byte) []byte {
	buf = buf[:0]
	if p.hasHi {
		buf = append(buf, 1)
	} else {
		buf = append(buf, 0)
	}
	buf = append(buf, p.lo...)
	if p.hasHi {
		buf = append(buf, p.hi...)
	}
	return buf
}

// allreduceBytes: root < 0 gives every member the result; otherwise only
// root needs it (the others still take part).
func allreduceBytes(l *group, send, recv []byte, red datatype.Reducer, tag, root int) error {
	n, me, m := l.size, l.rank, len(send)
	p := 1
	for p*2 <= n {
		p *= 2
	}
	extra := n - p
	tmp := make([]byte, m)
	combine := func(in, inout []byte, inIsLower bool) { // inout = ordered combination
		if inIsLower {
			red.Apply(in, inout)
			return
		}
		datatype.CopyCached(tmp, in)
		red.Apply(inout, tmp)
		datatype.CopyCached(inout, tmp)
	}
	if me >= p { // hand my data to member me-p, get the result back
		if err := l.t.Send(send, l.at(-p), tag); err != nil {
			return err
		}
		if root >= 0 && root != me {
			return nil
		}
		return l.recv(recv[:m], l.at(-p), tag)
	}
	cur := part{lo: append([]byte(nil), send...)}
	if me < extra {
		cur.hi, cur.hasHi = make([]byte, m), true
		if err := l.recv(cur.hi, l.at(p), tag); err != nil {
			return err
		}
	}
	out := make([]byte, 0, 1+2*m)
	in := make([]byte, 1+2*m)
	for mask := 1; mask < p; mask <<= 1 {
		dist := mask
		if me&mask != 0 {
			dist = -mask
		}
		partner := l.at(dist)
		out = cur.encode(out)
		st, err := l.t.Sendrecv(out, partner, tag, in, partner, tag)
		if err != nil {
			return err
		}
		if st.Count != 1+m && st.Count != 1+2*m {
			return pml.Exactly(st.Count, 1+m, partner)
		}
		theirs := part{lo: in[1 : 1+m], hasHi: in[0] == 1}
		if theirs.hasHi {
			if st.Count != 1+2*m {
				return pml.Exactly(st.Count, 1+2*m, partner)
			}
			theirs.hi = in[1+m : 1+2*m]
		}
		lower := dist < 0 // the partner's runs come first
		combine(theirs.lo, cur.lo, lower)
		switch {
		case theirs.hasHi && cur.hasHi:
			combine(theirs.hi, cur.hi, lower)
		case theirs.hasHi:
			cur.hi, cur.hasHi = append([]byte(nil), theirs.hi...), true
		}
	}
	result := cur.lo
	if cur.hasHi {
		red.Apply(cur.lo, cur.hi) // ranks below p, then the rest
		result = cur.hi
	}
	if root < 0 || root == me {
		datatype.CopyCached(recv, result)
	}
	if me < extra && (root < 0 || root == me+p) {
		return l.t.Send(result, l.at(p), tag)
	}
	return nil
}

// Scan gives member i the combination of the sends of members 0 … i, in
// rank order; Exscan of members 0 … i-1 (member 0's recv is left as is).
// Recursive doubling: ⌈log2 n⌉ rounds; LogChain hops suffice.
func Scan[T datatype.Elem](l *LogChain, send, recv []T, op *Op, tag int) error {
	return scan(l, send, recv, op, tag, "Scan", false)
}

// Exscan is the exclusive Scan.
func Exscan[T datatype.Elem](l *LogChain, send, recv []T, op *Op, tag int) error {
	return scan(l, send, recv, op, tag, "Exscan", true)
}

func scan[T datatype.Elem](l *LogChain, send, recv []T, op *Op, tag int, name string, exclusive bool) error {
	if err := chainOK(name, l, tag); err != nil {
		return err
	}
	red, err := datatype.ReducerFor[T](op)
	if err != nil {
		return wrapErr(name, l, err)
	}
	if len(send) != len(recv) {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: %s: %d elements to send, %d to receive", name, len(send), len(recv))
	}
	in, out := datatype.Bytes(send), datatype.Bytes(recv)
	partial := append([]byte(nil), in...)
	have := !exclusive
	var result []byte
	if have {
		result = append([]byte(nil), in...)
	}
	tmp, scratch := make([]byte, len(in)), make([]byte, len(in))
	for mask := 1; mask < l.size; mask <<= 1 {
		dist := mask
		if l.rank&mask != 0 {
			dist = -mask
		}
		if l.rank+dist >= l.size {
			continue
		}
		partner := l.at(dist)
		if err := l.sendrecv(partial, partner, tmp, partner, tag); err != nil {
			return wrapErr(name, l, err)
		}
		if dist < 0 { // theirs covers lower ranks
			red.Apply(tmp, partial)
			if have {
				red.Apply(tmp, result)
			} else {
				result, have = append([]byte(nil), tmp...), true
			}
		} else {
			datatype.CopyCached(scratch, tmp)
			red.Apply(partial, scratch)
			datatype.CopyCached(partial, scratch)
		}
	}
	if have {
		datatype.CopyCached(out, result)
	}
	return nil
}

// Allgather gathers every member's send into every member's recv, in rank
// order (Bruck: in round d receive from the member 2^d right the blocks it
// has and send ours 2^d left; a rotation at the end): ⌈log2 n⌉ rounds for
// any n.
func Allgather[T datatype.Elem](r *LogRing, send, recv []T, tag int) error {
	l, err := ringOf("Allgather", r, tag)
	if err != nil {
		return err
	}
	if len(recv) != len(send)*l.size {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Allgather: %d elements to receive for blocks of %d from %d members: want %d",
			len(recv), len(send), l.size, len(send)*l.size)
	}
	counts := make([]int, l.size)
	for i := range counts {
		counts[i] = len(send)
	}
	if err := allgatherv(l, datatype.Bytes(send), datatype.Bytes(recv), counts, datatype.Size[T](), tag); err != nil {
		return wrapErr("Allgather", l, err)
	}
	return nil
}

// Allgatherv is Allgather with counts[i] elements from member i, packed in
// rank order in recv.
func Allgatherv[T datatype.Elem](r *LogRing, send, recv []T, counts []int, tag int) error {
	l, err := ringOf("Allgatherv", r, tag)
	if err != nil {
		return err
	}
	if len(counts) != l.size {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Allgatherv: %d counts for %d members", len(counts), l.size)
	}
	total := 0
	for i, c := range counts {
		if c < 0 {
			return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Allgatherv: counts[%d] is %d", i, c)
		}
		total += c
	}
	if len(send) != counts[l.rank] || len(recv) != total {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Allgatherv: %d elements to send (counts[%d] %d), %d to receive (sum of counts %d)",
			len(send), l.rank, counts[l.rank], len(recv), total)
	}
	if err := allgatherv(l, datatype.Bytes(send), datatype.Bytes(recv), counts, datatype.Size[T](), tag); err != nil {
		return wrapErr("Allgatherv", l, err)
	}
	return nil
}

func allgatherv(l *group, send, recv []byte, counts []int, elem, tag int) error {
	n, me := l.size, l.rank
	// buf holds the blocks of members me, me+1, … in that order.
	size := func(i int) int { return counts[(me+i)%n] * elem }
	buf := make([]byte, 0, len(recv))
	buf = append(buf, send...)
	have := 1
	for k := 1; k < n; k <<= 1 {
		cnt := min(k, n-k)
		sendBytes := 0
		for i := 0; i < cnt; i++ {
			sendBytes += size(i)
		}
		recvBytes := 0
		for i := k; i < k+cnt; i++ {
			recvBytes += size(i)
		}
		in := make([]byte, recvBytes)
		if err := l.sendrecv(buf[:sendBytes], l.at(-k), in, l.at(k), tag); err != nil {
			return err
		}
		buf = append(buf[:lenOf(size, have)], in...)
		have += cnt
	}
	// Rotate into rank order.
	off := 0
	displ := make([]int, n)
	for i := 1; i < n; i++ {
		displ[i] = displ[i-1] + counts[i-1]*elem
	}
	for i := 0; i < n; i++ {
		s := size(i)
		datatype.CopyCached(recv[displ[(me+i)%n]:], buf[off:off+s])
		off += s
	}
	return nil
}

// lenOf is the bytes of the first k blocks.
func lenOf(size func(int) int, k int) int {
	t := 0
	for i := 0; i < k; i++ {
		t += size(i)
	}
	return t
}

// Gather collects every member's send at the root's recv, in rank order,
// up a binomial tree: ⌈log2 n⌉ rounds.
func Gather[T datatype.Elem](r *LogRing, send, recv []T, root, tag int) error {
	l, err := ringOf("Gather", r, tag)
	if err != nil {
		return err
	}
	if err := checkRoot("Gather", l, root); err != nil {
		return err
	}
	if l.rank == root && len(recv) != len(send)*l.size {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Gather: the root receives %d elements for blocks of %d from %d members", len(recv), len(send), l.size)
	}
	bs := len(datatype.Bytes(send))
	n := l.size
	vr := (l.rank - root + n) % n
	sub := 1
	for sub < n && vr&sub == 0 {
		sub <<= 1
	}
	buf := make([]byte, min(sub, n-vr)*bs)
	datatype.CopyCached(buf, datatype.Bytes(send))
	for mask := 1; mask < sub && vr+mask < n; mask <<= 1 {
		cnt := min(mask, n-vr-mask)
		if err := l.recv(buf[mask*bs:(mask+cnt)*bs], l.at(mask), tag); err != nil {
			return wrapErr("Gather", l, err)
		}
	}
	if vr != 0 {
		if err := l.t.Send(buf, l.at(-sub), tag); err != nil {
			return wrapErr("Gather", l, err)
		}
		return nil
	}
	out := datatype.Bytes(recv)
	for i := 0; i < n; i++ {
		datatype.CopyCached(out[((i+root)%n)*bs:], buf[i*bs:(i+1)*bs])
	}
	return nil
}

// Alltoall sends block j of every member's send to member j, which
// receives it as block i of its recv (Bruck: rotate, then in round d send
// the blocks whose index has bit d set 2^d right, then rotate back):
// ⌈log2 n⌉ rounds.
func Alltoall[T datatype.Elem](r *LogRing, send, recv []T, tag int) error {
	l, err := ringOf("Alltoall", r, tag)
	if err != nil {
		return err
	}
	n := l.size
	counts := make([]int, n)
	if len(send)%n == 0 {
		for i := range counts {
			counts[i] = len(send) / n
		}
	}
	if len(send) != len(recv) || len(send)%n != 0 {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Alltoall: %d elements to send and %d to receive: want equal, a multiple of %d", len(send), len(recv), n)
	}
	if err := alltoallv(l, datatype.Bytes(send), datatype.Bytes(recv), counts, counts, datatype.Size[T](), tag, true); err != nil {
		return wrapErr("Alltoall", l, err)
	}
	return nil
}

// Alltoallv sends sendCounts[j] elements to member j (packed in rank
// order in send) and receives recvCounts[i] from member i (packed in recv).
// Bruck's rounds with each block's length sent ahead of the data.
func Alltoallv[T datatype.Elem](r *LogRing, send []T, sendCounts []int, recv []T, recvCounts []int, tag int) error {
	l, err := ringOf("Alltoallv", r, tag)
	if err != nil {
		return err
	}
	n := l.size
	if len(sendCounts) != n || len(recvCounts) != n {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Alltoallv: %d send and %d receive counts for %d members", len(sendCounts), len(recvCounts), n)
	}
	st, rt := 0, 0
	for i := 0; i < n; i++ {
		if sendCounts[i] < 0 || recvCounts[i] < 0 {
			return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Alltoallv: a negative count for member %d", i)
		}
		st, rt = st+sendCounts[i], rt+recvCounts[i]
	}
	if len(send) != st || len(recv) != rt {
		return mpierr.Errorf(mpierr.ErrCount, "lwgrp: Alltoallv: %d elements to send (counts sum to %d), %d to receive (counts sum to %d)", len(send), st, len(recv), rt)
	}
	if err := alltoallv(l, datatype.Bytes(send), datatype.Bytes(recv), sendCounts, recvCounts, datatype.Size[T](), tag, false); err != nil {
		return wrapErr("Alltoallv", l, err)
	}
	return nil
}

// alltoallv is Bruck's algorithm for blocks of any length. A block passes
// through members that do not know its length, so each round's lengths go
// ahead of its data, unless every block has the same (uniform: Alltoall).
func alltoallv(l *group, send, recv []byte, sendCounts, recvCounts []int, elem, tag int, uniform bool) error {
	n, me := l.size, l.rank
	sdispl, rdispl := make([]int, n), make([]int, n)
	for i := 1; i < n; i++ {
		sdispl[i] = sdispl[i-1] + sendCounts[i-1]*elem
		rdispl[i] = rdispl[i-1] + recvCounts[i-1]*elem
	}
	// blocks[i] travels to member me+i (after the rotation).
	blocks := make([][]byte, n)
	for i := 0; i < n; i++ {
		j := (me + i) % n
		blocks[i] = send[sdispl[j] : sdispl[j]+sendCounts[j]*elem]
	}
	for k := 1; k < n; k <<= 1 {
		var out []byte
		var idx []int
		for i := 0; i < n; i++ {
			if i&k != 0 {
				idx = append(idx, i)
				out = binary.LittleEndian.AppendUint64(out, uint64(len(blocks[i])))
			}
		}
		for _, i := range idx {
			out = append(out, blocks[i]...)
		}
		head := make([]byte, 8*len(idx))
		dst, src := l.at(k), l.at(-k)
		if uniform {
			datatype.CopyCached(head, out[:len(head)]) // the same lengths come back
		} else if err := l.sendrecv(out[:len(head)], dst, head, src, tag); err != nil {
			return err
		}
		total := 0
		for j := range idx {
			total += int(binary.LittleEndian.Uint64(head[8*j:]))
		}
		if total > len(recv)+len(send) {
			return mpierr.Errorf(mpierr.ErrCount, "parent rank %d announced %d bytes, more than this exchange holds", src, total)
		}
		in := make([]byte, total)
		if err := l.sendrecv(out[len(head):], dst, in, src, tag); err != nil {
			return err
		}
		off := 0
		for j, i := range idx {
			s := int(binary.LittleEndian.Uint64(head[8*j:]))
			blocks[i] = in[off : off+s]
			off += s
		}
	}
	// blocks[i] now came from member me-i.
	for i := 0; i < n; i++ {
		from := (me - i + n) % n
		if len(blocks[i]) != recvCounts[from]*elem {
			return mpierr.Errorf(mpierr.ErrCount, "member %d sent %d bytes where %d were expected", from, len(blocks[i]), recvCounts[from]*elem)
		}
		datatype.CopyCached(recv[rdispl[from]:], blocks[i])
	}
	return nil
}
