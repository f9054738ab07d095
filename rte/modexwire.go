package rte

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gompi/gompi/mpierr"
)

// The modex wire form.
//
// Each node's leader publishes one blob per fence: the records of every
// process on its node, in a printable form that PMI-1 servers (Hydra's
// included) carry verbatim. Key names appear once per blob, not once per
// process: a record lists which of the blob's keys it has in a bitmap, then
// each value's length and bytes. Numbers are written with a 64-letter
// alphabet, 5 bits per letter, so that small numbers (ranks, lengths, counts)
// take one letter. Value bytes that PMI could mangle are escaped as %XX.
//
//	blob    = 'A' count(keys) {len name} count(nodeEntries) {key len value}
//	          count(records) {rankDelta bitmap {len value}}
//	chunk 0 = count(chunks) blob[…]
//
// The blob is cut into chunks that fit the server's vallen_max; they are
// stored under the keys m<fence>.<node>.<chunk>.

const blobVersion = 'A'

// digits are the letters of the number alphabet: 0–31 end a number, 32–63
// carry 5 bits and say that more letters follow. None of them needs escaping
// in PMI-1 or PMI-2.
const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVabcdefghijklmnopqrstuvwxyz-_.+*@"

var digitValue = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for i := 0; i < len(digits); i++ {
		t[digits[i]] = int8(i)
	}
	return
}()

func putNumber(b *strings.Builder, n int) {
	// Most significant group first, so that a reader can stop at the first
	// letter below 32.
	var groups [13]byte
	i := len(groups)
	for {
		i--
		groups[i] = byte(n & 31)
		n >>= 5
		if n == 0 {
			break
		}
	}
	for ; i < len(groups); i++ {
		g := groups[i]
		if i < len(groups)-1 {
			g |= 32
		}
		b.WriteByte(digits[g])
	}
}

// safeByte reports whether a value byte travels as itself: printable ASCII
// except the escape '%', PMI-1's escape '\' and PMI-2's terminator ';'.
func safeByte(c byte) bool { return c > ' ' && c < 0x7f && c != '%' && c != '\\' && c != ';' }

const hexDigits = "0123456789ABCDEF"

func putValue(b *strings.Builder, v []byte) {
	putNumber(b, len(v))
	for _, c := range v {
		if safeByte(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
}

// record is one process's contribution to a fence.
type record struct {
	rank int
	proc map[string][]byte
	node map[string][]byte
}

// nodeBlob is what a leader publishes for its node.
type nodeBlob struct {
	node  map[string][]byte
	procs map[int]map[string][]byte
}

// encodeBlob writes a node's blob. Keys are sorted and records are in rank
// order, so that equal inputs give equal text.
func encodeBlob(nb nodeBlob) string {
	keySet := map[string]bool{}
	for k := range nb.node {
		keySet[k] = true
	}
	for _, p := range nb.procs {
		for k := range p {
			keySet[k] = true
		}
	}
	keys := make([]string, 0, len(keySet))
	for k := range keySet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	index := map[string]int{}
	var b strings.Builder
	b.WriteByte(blobVersion)
	putNumber(&b, len(keys))
	for i, k := range keys {
		index[k] = i
		putNumber(&b, len(k))
		b.WriteString(k)
	}
	putNumber(&b, len(nb.node))
	for _, k := range sortedKeys(nb.node) {
		putNumber(&b, index[k])
		putValue(&b, nb.node[k])
	}
	ranks := make([]int, 0, len(nb.procs))
	for r := range nb.procs {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	putNumber(&b, len(ranks))
	prev := -1
	for _, r := range ranks {
		putNumber(&b, r-prev-1)
		prev = r
		vals := nb.procs[r]
		for g := 0; g < len(keys); g += 5 {
			bits := 0
			for j := g; j < g+5 && j < len(keys); j++ {
				if _, ok := vals[keys[j]]; ok {
					bits |= 1 << (j - g)
				}
			}
			b.WriteByte(digits[bits])
		}
		for _, k := range keys {
			if v, ok := vals[k]; ok {
				putValue(&b, v)
			}
		}
	}
	return b.String()
}

func sortedKeys(m map[string][]byte) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// blobReader decodes; every read checks bounds, so that a damaged or hostile
// blob is an error, never a panic.
type blobReader struct {
	s   string
	i   int
	err error
}

func (r *blobReader) fail(format string, a ...any) {
	if r.err == nil {
		r.err = mpierr.Errorf(mpierr.ErrIntern, "modex: malformed data at offset %d: %s", r.i, fmt.Sprintf(format, a...))
	}
}

func (r *blobReader) number() int {
	n := 0
	for k := 0; ; k++ {
		if r.err != nil {
			return 0
		}
		if r.i >= len(r.s) {
			r.fail("number runs past the end")
			return 0
		}
		d := digitValue[r.s[r.i]]
		r.i++
		if d < 0 {
			r.fail("%q is not a number letter", r.s[r.i-1])
			return 0
		}
		if k >= 6 { // 30 bits is more than any count or length here
			r.fail("number too large")
			return 0
		}
		n = n<<5 | int(d&31)
		if d < 32 {
			return n
		}
	}
}

// count reads a number that sizes what follows; it must not exceed what the
// rest of the text could hold.
func (r *blobReader) count() int {
	n := r.number()
	if n > len(r.s)-r.i+1 {
		r.fail("count %d exceeds the data", n)
		return 0
	}
	return n
}

func (r *blobReader) text(n int) string {
	if r.err != nil {
		return ""
	}
	if n > len(r.s)-r.i {
		r.fail("text of %d bytes runs past the end", n)
		return ""
	}
	t := r.s[r.i : r.i+n]
	r.i += n
	return t
}

func (r *blobReader) value() []byte {
	n := r.count()
	out := make([]byte, 0, n)
	for len(out) < n && r.err == nil {
		if r.i >= len(r.s) {
			r.fail("value runs past the end")
			break
		}
		c := r.s[r.i]
		if c == '%' {
			if r.i+2 >= len(r.s) {
				r.fail("truncated escape")
				break
			}
			hi, lo := strings.IndexByte(hexDigits, r.s[r.i+1]), strings.IndexByte(hexDigits, r.s[r.i+2])
			if hi < 0 || lo < 0 {
				r.fail("bad escape %q", r.s[r.i:r.i+3])
				break
			}
			out = append(out, byte(hi<<4|lo))
			r.i += 3
			continue
		}
		if !safeByte(c) {
			r.fail("byte 0x%02x should have been escaped", c)
			break
		}
		out = append(out, c)
		r.i++
	}
	return out
}

// decodeBlob parses a node's blob.
func decodeBlob(s string) (nodeBlob, error) {
	r := &blobReader{s: s}
	nb := nodeBlob{node: map[string][]byte{}, procs: map[int]map[string][]byte{}}
	if len(s) == 0 || s[0] != blobVersion {
		return nb, mpierr.Errorf(mpierr.ErrIntern, "modex: data does not start with version %q", blobVersion)
	}
	r.i = 1
	keys := make([]string, r.count())
	for i := range keys {
		keys[i] = r.text(r.count())
		if r.err == nil && !validKey(keys[i]) {
			r.fail("invalid key %q", keys[i])
		}
	}
	nn := r.count()
	for i := 0; i < nn && r.err == nil; i++ {
		k := r.number()
		if k >= len(keys) {
			r.fail("key index %d of %d", k, len(keys))
			break
		}
		nb.node[keys[k]] = r.value()
	}
	nrec := r.count()
	rank := -1
	for i := 0; i < nrec && r.err == nil; i++ {
		rank += r.number() + 1
		vals := map[string][]byte{}
		var present []int
		for g := 0; g < len(keys) && r.err == nil; g += 5 {
			bits := 0
			if r.i < len(r.s) {
				bits = int(digitValue[r.s[r.i]])
			}
			if bits < 0 || bits >= 32 || r.i >= len(r.s) {
				r.fail("bad key bitmap")
				break
			}
			r.i++
			for j := g; j < g+5 && j < len(keys); j++ {
				if bits&(1<<(j-g)) != 0 {
					present = append(present, j)
				}
			}
		}
		for _, k := range present {
			vals[keys[k]] = r.value()
		}
		nb.procs[rank] = vals
	}
	if r.err == nil && r.i != len(s) {
		r.fail("%d bytes left over", len(s)-r.i)
	}
	return nb, r.err
}

// validKey says whether a modex key may be used: letters, digits, '.', '-',
// '_', at most 64 bytes. Keys travel unescaped.
func validKey(k string) bool {
	if k == "" || len(k) > 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// chunkKey names chunk i of node's blob of fence seq.
func chunkKey(seq, node, i int) string { return fmt.Sprintf("m%d.%d.%d", seq, node, i) }

// splitChunks cuts a blob into values of at most max bytes, the first
// prefixed with the number of chunks.
func splitChunks(blob string, max int) []string {
	// max is the server's vallen_max, whatever it said: no chunk needs
	// more than the blob and its count, and a larger max would overflow
	// the count's arithmetic.
	if max < 16 {
		max = 16
	}
	max = min(max, len(blob)+16)
	numberLen := func(n int) int {
		var b strings.Builder
		putNumber(&b, n)
		return b.Len()
	}
	// The smallest n whose prefix plus the blob fits in n chunks.
	n := (len(blob) + 1 + max - 1) / max
	for (numberLen(n)+len(blob)+max-1)/max > n {
		n++
	}
	var b strings.Builder
	putNumber(&b, n)
	text := b.String() + blob
	out := make([]string, 0, n)
	for len(text) > max {
		out = append(out, text[:max])
		text = text[max:]
	}
	return append(out, text)
}

// joinChunks reads the blob of node that chunk 0, first, begins: the count
// of chunks in first, then get(i) for each chunk i after it, as PMI holds
// them. get says false for a chunk not there. Everything read was put by
// another process: a bad count or a missing chunk is an ErrIntern error.
func joinChunks(first string, node int, get func(i int) (string, bool, error)) (blob string, chunks int, err error) {
	n, text, err := chunkCount(first)
	if err != nil {
		return "", 0, err
	}
	if n == 1 {
		return text, 1, nil
	}
	var b strings.Builder
	b.WriteString(text)
	for i := 1; i < n; i++ {
		part, found, err := get(i)
		if err != nil {
			return "", 0, err
		}
		if !found {
			return "", 0, mpierr.Errorf(mpierr.ErrIntern, "modex: chunk %d of %d of node %d is missing", i, n, node)
		}
		b.WriteString(part)
	}
	return b.String(), n, nil
}

// chunkCount reads the number of chunks from chunk 0 and returns the rest of
// chunk 0.
func chunkCount(first string) (int, string, error) {
	r := &blobReader{s: first}
	n := r.number()
	if r.err != nil {
		return 0, "", r.err
	}
	if n < 1 || n > 1<<16 {
		return 0, "", mpierr.Errorf(mpierr.ErrIntern, "modex: implausible chunk count %d", n)
	}
	return n, first[r.i:], nil
}
