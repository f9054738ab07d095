package rte

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/mpierr"
)

// sameBlob compares two node blobs, treating nil and empty maps and values
// as equal (the decoder always makes maps).
func sameBlob(a, b nodeBlob) error {
	if err := sameValues("node", a.node, b.node); err != nil {
		return err
	}
	if len(a.procs) != len(b.procs) {
		return fmt.Errorf("%d processes, want %d", len(a.procs), len(b.procs))
	}
	for r, va := range a.procs {
		vb, ok := b.procs[r]
		if !ok {
			return fmt.Errorf("rank %d missing", r)
		}
		if err := sameValues(fmt.Sprintf("rank %d", r), va, vb); err != nil {
			return err
		}
	}
	return nil
}

func sameValues(what string, a, b map[string][]byte) error {
	if len(a) != len(b) {
		return fmt.Errorf("%s: %d values, want %d", what, len(a), len(b))
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok {
			return fmt.Errorf("%s: key %q missing", what, k)
		}
		if !bytes.Equal(va, vb) {
			return fmt.Errorf("%s: %q = %q, want %q", what, k, abbreviate(string(va)), abbreviate(string(vb)))
		}
	}
	return nil
}

func allBytes() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// blobCases are the inputs of the round-trip tests (and seeds of the fuzz
// target).
func blobCases() map[string]nodeBlob {
	many := nodeBlob{node: map[string][]byte{"shm": []byte("gompi-1a2b3c4d-seg-0")}, procs: map[int]map[string][]byte{}}
	keys := []string{"btl.tcp", "btl.shm", "pml", "arch", "hostname", "cuda", "ucx.addr", "rdma-key", "k8", "k9", "k10", "k_11"}
	for r := 0; r < 20; r++ {
		vals := map[string][]byte{}
		for i, k := range keys {
			if (r+i)%3 != 0 { // a different subset of the 12 keys per rank
				vals[k] = []byte(fmt.Sprintf("%s-of-%d", k, r))
			}
		}
		many.procs[r] = vals
	}
	many.procs[20] = map[string][]byte{} // a process that put nothing
	many.procs[21] = map[string][]byte{"k_11": nil}

	return map[string]nodeBlob{
		"no keys":           {},
		"empty maps":        {node: map[string][]byte{}, procs: map[int]map[string][]byte{}},
		"one empty process": {procs: map[int]map[string][]byte{0: {}}},
		"node only": {node: map[string][]byte{
			"shm": []byte("gompi-1a2b3c4d-seg-0"), "numa": []byte("0-3"), "x": []byte("="),
		}},
		"many processes": many,
		"every byte": {
			node:  map[string][]byte{"all": allBytes()},
			procs: map[int]map[string][]byte{0: {"all": allBytes(), "rev": bytes.Repeat([]byte{255, 0, '%', '\\', ';', ' '}, 3)}},
		},
		"empty values": {
			node:  map[string][]byte{"e": {}},
			procs: map[int]map[string][]byte{0: {"e": {}, "f": nil}, 1: {"f": []byte{}}},
		},
		"long values": {
			node:  map[string][]byte{"big": bytes.Repeat([]byte("0123456789abcdef"), 100<<10/16)},
			procs: map[int]map[string][]byte{5: {"big": bytes.Repeat([]byte{0, ' ', 'a'}, 100<<10/3), "small": []byte("s")}},
		},
		"rank gaps": {procs: map[int]map[string][]byte{
			3: {"card": []byte("addr-3")}, 7: {"card": []byte("addr-7")}, 40: {"card": []byte("addr-40")},
			100000: {"card": []byte("far")}, 1 << 29: {"card": []byte("very far")},
		}},
		"long key": {procs: map[int]map[string][]byte{0: {strings.Repeat("k", 64): []byte("v")}}},
	}
}

func TestBlobRoundTrip(t *testing.T) {
	for name, nb := range blobCases() {
		text := encodeBlob(nb)
		got, err := decodeBlob(text)
		if err != nil {
			t.Errorf("%s: decodeBlob: %v", name, err)
			continue
		}
		if err := sameBlob(got, nb); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if again := encodeBlob(got); again != text {
			t.Errorf("%s: encoding is not deterministic", name)
		}
		if err := pmiSafe(text); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestBlobCompact checks the compactness the format promises: key names once
// per blob, one letter for small numbers, a bitmap letter per 5 keys.
func TestBlobCompact(t *testing.T) {
	if got := encodeBlob(nodeBlob{}); got != "A000" {
		t.Errorf("empty blob = %q, want A000", got)
	}
	nb := nodeBlob{procs: map[int]map[string][]byte{}}
	for r := 0; r < 10; r++ {
		nb.procs[r] = map[string][]byte{"card": []byte("v")}
	}
	// 'A', 1 key (count, length, name), 0 node entries, 10 records, then
	// per record: rank delta, bitmap, length, value.
	want := "A" + "1" + "4card" + "0" + "A" + strings.Repeat("011v", 10)
	if got := encodeBlob(nb); got != want {
		t.Errorf("blob = %q, want %q", got, want)
	}
	// Six keys need two bitmap letters.
	six := map[string][]byte{}
	for i := 0; i < 6; i++ {
		six[fmt.Sprintf("k%d", i)] = []byte("v")
	}
	got := encodeBlob(nodeBlob{procs: map[int]map[string][]byte{0: six}})
	if !strings.HasSuffix(got, "1"+"0"+"V1"+strings.Repeat("1v", 6)) {
		t.Errorf("six keys: %q does not end in one record with bitmap V1", got)
	}
}

func TestNumbers(t *testing.T) {
	check := func(n int) {
		var b strings.Builder
		putNumber(&b, n)
		s := b.String()
		r := &blobReader{s: s}
		got := r.number()
		if r.err != nil || got != n || r.i != len(s) {
			t.Fatalf("number(putNumber(%d) = %q) = %d, err %v, consumed %d of %d", n, s, got, r.err, r.i, len(s))
		}
		// 5 bits per letter.
		letters := 1
		for m := n >> 5; m > 0; m >>= 5 {
			letters++
		}
		if len(s) != letters {
			t.Fatalf("putNumber(%d) = %q: %d letters, want %d", n, s, len(s), letters)
		}
	}
	for n := 0; n <= 100000; n++ {
		check(n)
	}
	for _, n := range []int{1<<20 - 1, 1 << 20, 1<<25 - 1, 1 << 25, 123456789, 1<<30 - 1} {
		check(n)
	}
	// Numbers follow each other without separators.
	var b strings.Builder
	seq := []int{0, 31, 32, 1023, 1024, 7, 1<<30 - 1, 5}
	for _, n := range seq {
		putNumber(&b, n)
	}
	r := &blobReader{s: b.String()}
	for _, n := range seq {
		if got := r.number(); got != n || r.err != nil {
			t.Fatalf("in sequence: %d, %v; want %d", got, r.err, n)
		}
	}
	// The reader stops at 30 bits (six letters), as documented: lengths and
	// counts never come near.
	var big strings.Builder
	putNumber(&big, 1<<30)
	r = &blobReader{s: big.String()}
	r.number()
	if !errors.Is(r.err, mpierr.ErrIntern) {
		t.Errorf("number of 1<<30: err %v, want ErrIntern", r.err)
	}
	for _, s := range []string{"", "a", "@@", "!", " ", "%", "a!"} {
		r := &blobReader{s: s}
		r.number()
		if r.err == nil {
			t.Errorf("number(%q) succeeded", s)
		}
	}
}

func TestDigitsArePMISafe(t *testing.T) {
	if len(digits) != 64 {
		t.Fatalf("%d digits, want 64", len(digits))
	}
	seen := map[byte]bool{}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if seen[c] {
			t.Errorf("digit %q appears twice", c)
		}
		seen[c] = true
		if !safeByte(c) || strings.IndexByte(" \t\r\n\x00\\%;", c) >= 0 {
			t.Errorf("digit %q is not safe on the PMI wire", c)
		}
		if digitValue[c] != int8(i) {
			t.Errorf("digitValue[%q] = %d, want %d", c, digitValue[c], i)
		}
	}
	for c := 0; c < 256; c++ {
		if !seen[byte(c)] && digitValue[c] != -1 {
			t.Errorf("digitValue[%q] = %d for a non-digit", byte(c), digitValue[c])
		}
	}
}

// pmiSafe checks that text travels through PMI-1 (and PMI-2) unchanged and
// unescaped: printable ASCII without blank, backslash or ';'.
func pmiSafe(text string) error {
	for i := 0; i < len(text); i++ {
		c := text[i]
		if c <= ' ' || c >= 0x7f || c == '\\' || c == ';' {
			return fmt.Errorf("byte %q at offset %d is not PMI-safe", c, i)
		}
	}
	return nil
}

const keyAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_"

func randomBlob(rng *rand.Rand) nodeBlob {
	randKey := func() string {
		b := make([]byte, 1+rng.Intn(12))
		for i := range b {
			b[i] = keyAlphabet[rng.Intn(len(keyAlphabet))]
		}
		return string(b)
	}
	randValue := func() []byte {
		b := make([]byte, rng.Intn(80))
		rng.Read(b)
		return b
	}
	pool := make([]string, 1+rng.Intn(15))
	for i := range pool {
		pool[i] = randKey()
	}
	nb := nodeBlob{node: map[string][]byte{}, procs: map[int]map[string][]byte{}}
	for i := rng.Intn(4); i > 0; i-- {
		nb.node[pool[rng.Intn(len(pool))]] = randValue()
	}
	rank := rng.Intn(3)
	for i := rng.Intn(30); i > 0; i-- {
		vals := map[string][]byte{}
		for j := rng.Intn(len(pool) + 1); j > 0; j-- {
			vals[pool[rng.Intn(len(pool))]] = randValue()
		}
		nb.procs[rank] = vals
		rank += 1 + rng.Intn(100)
	}
	return nb
}

func TestBlobRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		nb := randomBlob(rng)
		text := encodeBlob(nb)
		if err := pmiSafe(text); err != nil {
			t.Fatalf("case %d: %v in %q", i, err, text)
		}
		got, err := decodeBlob(text)
		if err != nil {
			t.Fatalf("case %d: decodeBlob(%q): %v", i, text, err)
		}
		if err := sameBlob(got, nb); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		// Chunked at a small size, it still is PMI-safe and reassembles.
		chunks := splitChunks(text, 16+rng.Intn(200))
		n, first, err := chunkCount(chunks[0])
		if err != nil || n != len(chunks) {
			t.Fatalf("case %d: chunkCount = %d, %v; %d chunks", i, n, err, len(chunks))
		}
		for _, ch := range chunks {
			if err := pmiSafe(ch); err != nil {
				t.Fatalf("case %d: chunk: %v", i, err)
			}
		}
		if first+strings.Join(chunks[1:], "") != text {
			t.Fatalf("case %d: chunks do not reassemble", i)
		}
	}
}

func TestChunks(t *testing.T) {
	for _, max := range []int{16, 100, 1024, 65536} {
		sizes := map[int]bool{0: true, 1: true, 2: true}
		for _, k := range []int{1, 2, 3, 31, 32, 33} {
			if k*max > 1<<20 {
				continue
			}
			for d := -3; d <= 3; d++ {
				if s := k*max + d; s >= 0 {
					sizes[s] = true
				}
			}
		}
		for size := range sizes {
			blob := blobText(size)
			chunks := splitChunks(blob, max)
			n, first, err := chunkCount(chunks[0])
			if err != nil {
				t.Fatalf("max %d size %d: chunkCount: %v", max, size, err)
			}
			if n != len(chunks) {
				t.Fatalf("max %d size %d: chunk 0 says %d chunks, there are %d", max, size, n, len(chunks))
			}
			for i, ch := range chunks {
				if len(ch) > max {
					t.Fatalf("max %d size %d: chunk %d has %d bytes", max, size, i, len(ch))
				}
				if ch == "" {
					t.Fatalf("max %d size %d: chunk %d is empty", max, size, i)
				}
			}
			if got := first + strings.Join(chunks[1:], ""); got != blob {
				t.Fatalf("max %d size %d: reassembled %d bytes, want %d", max, size, len(got), len(blob))
			}
			// No more chunks than needed.
			prefix := len(chunks[0]) - len(first)
			if need := (prefix + size + max - 1) / max; n != need {
				t.Fatalf("max %d size %d: %d chunks, %d would do", max, size, n, need)
			}
		}
	}
	// A max below 16 is raised to 16.
	for _, ch := range splitChunks(blobText(100), 1) {
		if len(ch) > 16 {
			t.Fatalf("chunk of %d bytes with max 1", len(ch))
		}
	}
	for _, bad := range []string{"", " ", "0", "0abc", "%%", "@@@@@@@0", "a0"} {
		if n, _, err := chunkCount(bad); err == nil {
			t.Errorf("chunkCount(%q) = %d, want an error", bad, n)
		} else if !errors.Is(err, mpierr.ErrIntern) {
			t.Errorf("chunkCount(%q): %v lacks ErrIntern", bad, err)
		}
	}
	// 1<<16 chunks is the most chunk 0 may announce.
	var b strings.Builder
	putNumber(&b, 1<<16+1)
	if _, _, err := chunkCount(b.String() + "A"); err == nil {
		t.Error("chunkCount accepted 65537 chunks")
	}
}

// blobText returns size bytes that look like a blob.
func blobText(size int) string {
	var b strings.Builder
	for b.Len() < size {
		b.WriteString("A1.4card0Aq9192.168.1.17:40001%20")
	}
	return b.String()[:size]
}

func TestChunkKey(t *testing.T) {
	for _, tc := range []struct {
		seq, node, i int
		want         string
	}{
		{0, 0, 0, "m0.0.0"}, {1, 12, 3, "m1.12.3"},
	} {
		if got := chunkKey(tc.seq, tc.node, tc.i); got != tc.want {
			t.Errorf("chunkKey(%d, %d, %d) = %q, want %q", tc.seq, tc.node, tc.i, got, tc.want)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	for name, nb := range blobCases() {
		if name == "long values" {
			continue // every prefix of 200 KiB takes long; the others cover it
		}
		text := encodeBlob(nb)
		for n := 0; n < len(text); n++ {
			if _, err := decodeBlob(text[:n]); err == nil {
				t.Fatalf("%s: the truncation to %d of %d bytes decodes", name, n, len(text))
			} else if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("%s: truncation to %d: %v lacks ErrIntern", name, n, err)
			}
		}
		if _, err := decodeBlob(text + "0"); err == nil {
			t.Errorf("%s: trailing data accepted", name)
		}
		for c := 0; c < 256; c++ {
			if c == blobVersion {
				continue
			}
			if _, err := decodeBlob(string([]byte{byte(c)}) + text[1:]); err == nil {
				t.Fatalf("%s: version byte %q accepted", name, byte(c))
			}
		}
	}
	// Truncations of the long case, sampled.
	text := encodeBlob(blobCases()["long values"])
	for n := 0; n < len(text); n += 997 {
		if _, err := decodeBlob(text[:n]); err == nil {
			t.Fatalf("long values: the truncation to %d decodes", n)
		}
	}
	for _, bad := range []string{
		"A1" + "2k!" + "00",                                                  // invalid key name
		"A0" + "1" + "0" + "1v" + "0",                                        // node entry with a key index but no keys
		"A1" + "1k" + "0" + "1" + "0" + "a" + "1v",                           // bitmap letter out of range
		"A1" + "1k" + "0" + "1" + "0" + "1" + "1 ",                           // unescaped blank
		"A1" + "1k" + "0" + "1" + "0" + "1" + "1%G0",                         // bad escape
		"A1" + "1k" + "0" + "1" + "0" + "1" + "1%4",                          // truncated escape
		"A1" + "1k" + "0" + "1" + "0" + "1" + "2%41",                         // value shorter than its length
		"A" + "@@@@@@0",                                                      // number too large
		"A1" + "1k" + "0" + "1" + "0" + "1" + "V0" + strings.Repeat("x", 10), // length beyond the data
	} {
		if nb, err := decodeBlob(bad); err == nil {
			t.Errorf("decodeBlob(%q) = %+v, want an error", bad, nb)
		}
	}
}

func TestStatsOfBlobs(t *testing.T) {
	node0 := nodeBlob{
		node: map[string][]byte{"shm": []byte("seg-0")},
		procs: map[int]map[string][]byte{
			0: {"tcp": []byte("10.0.0.1:4000"), "arch": []byte("x86_64-le")},
			1: {"tcp": []byte("10.0.0.1:4001")},
		},
	}
	node1 := nodeBlob{procs: map[int]map[string][]byte{2: {"tcp": []byte("10.0.0.2:4000"), "ucx": bytes.Repeat([]byte{0}, 300)}}}
	kv := map[string]string{CookieKey: "00", ProcessMappingKey: "(vector,(0,2,2))", "m1.0.0x": "junk", "m01.0.0": "junk"}
	puts := 0
	for node, nb := range []nodeBlob{node0, node1} {
		for i, ch := range splitChunks(encodeBlob(nb), 64) {
			kv[chunkKey(1, node, i)] = ch
			puts++
		}
	}
	if puts < 3 { // node 1's 300 escaped NULs need several chunks of 64
		t.Fatalf("%d chunks: the case does not span chunks", puts)
	}
	st, err := StatsOfBlobs(kv)
	if err != nil {
		t.Fatal(err)
	}
	wantBytes := int64(len("seg-0") + len("10.0.0.1:4000") + len("x86_64-le") + len("10.0.0.1:4001") + len("10.0.0.2:4000") + 300)
	if st.Processes != 3 || st.Entries != 6 || st.ValueBytes != wantBytes || st.Keys != 3 {
		t.Errorf("stats = %+v, want 3 processes, 6 entries, %d value bytes, 3 keys", st, wantBytes)
	}
	if st.Puts != puts {
		t.Errorf("Puts = %d, want the %d chunks", st.Puts, puts)
	}
	delete(kv, chunkKey(1, 1, 1))
	if _, err := StatsOfBlobs(kv); err == nil {
		t.Error("a missing chunk was not noticed")
	}
	if st, err := StatsOfBlobs(nil); err != nil || st != (ModexStats{}) {
		t.Errorf("StatsOfBlobs(nil) = %+v, %v", st, err)
	}
	if o := (ModexStats{}).NamingOverhead(); o != 0 {
		t.Errorf("overhead of nothing = %v", o)
	}
	if o := (ModexStats{Entries: 4, ValueBytes: 100, WireBytes: 110}).NamingOverhead(); o != 2.5 {
		t.Errorf("overhead = %v, want 2.5", o)
	}
}

func FuzzDecodeBlob(f *testing.F) {
	for name, nb := range blobCases() {
		if name != "long values" {
			f.Add(encodeBlob(nb))
		}
	}
	f.Add("A000")
	f.Add("A1" + "1k" + "0" + "1" + "0" + "V" + "1v")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		nb, err := decodeBlob(s)
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("decodeBlob(%q): %v lacks ErrIntern", s, err)
			}
			return
		}
		for r, vals := range nb.procs {
			if r < 0 {
				t.Fatalf("decodeBlob(%q) gave rank %d", s, r)
			}
			for k := range vals {
				if !validKey(k) {
					t.Fatalf("decodeBlob(%q) gave key %q", s, k)
				}
			}
		}
		text := encodeBlob(nb)
		if err := pmiSafe(text); err != nil {
			t.Fatalf("encodeBlob(decodeBlob(%q)) = %q: %v", s, text, err)
		}
		again, err := decodeBlob(text)
		if err != nil {
			t.Fatalf("encodeBlob(decodeBlob(%q)) = %q does not decode: %v", s, text, err)
		}
		if err := sameBlob(again, nb); err != nil {
			t.Fatalf("decodeBlob(%q), encoded as %q, decodes differently: %v", s, text, err)
		}
	})
}

// TestSplitChunksLarge: a node blob of 4 MiB under Hydra's vallen_max of
// 1024 (4097 chunks) is split in well under a second by a linear split.
func TestSplitChunksLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large blob")
	}
	blob := blobText(4 << 20)
	done := make(chan []string, 1)
	go func() { done <- splitChunks(blob, 1024) }()
	select {
	case chunks := <-done:
		n, first, err := chunkCount(chunks[0])
		if err != nil || n != len(chunks) || first+strings.Join(chunks[1:], "") != blob {
			t.Fatalf("%d chunks, count %d, %v", len(chunks), n, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("splitChunks of 4 MiB at max 1024 did not return within 5 s")
	}
}
