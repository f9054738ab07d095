package rte

import (
	"errors"
	"strings"
	"testing"

	"github.com/gompi/gompi/mpierr"
)

// FuzzChunks: a node's blob goes through PMI in chunks of at most the
// server's vallen_max (any number the server says), and comes back from
// what other processes put.
//
// A blob split at any maximum comes back whole from its chunks, each
// within the maximum (16 at least). Chunks from anywhere (first, then the
// NUL-separated parts) are refused with ErrIntern, or give the text after
// the count in first followed by exactly the parts the count names, asked
// for in order; StatsOfBlobs, which mpirun runs on what ranks put, refuses
// them with ErrIntern or counts their chunks.
func FuzzChunks(f *testing.F) {
	blob := encodeBlob(nodeBlob{node: map[string][]byte{"shm": []byte("seg-0")},
		procs: map[int]map[string][]byte{0: {"tcp": []byte("10.0.0.1:4000")}, 1: {"tcp": []byte("10.0.0.1:4001")}}})
	chunks := splitChunks(blob, 16)
	f.Add(blob, 16, chunks[0], strings.Join(chunks[1:], "\x00"))
	f.Add(blob, 1<<62, blob, "")
	f.Add("", 0, "1", "")
	f.Add("x", -5, "3abc", "def")
	f.Add(strings.Repeat("y", 100), 1023, "_", "")
	f.Fuzz(func(t *testing.T, blob string, max int, first, rest string) {
		chunks := splitChunks(blob, max)
		for i, ch := range chunks {
			if len(ch) > max && len(ch) > 16 {
				t.Fatalf("splitChunks(%d bytes, %d): chunk %d of %d bytes", len(blob), max, i, len(ch))
			}
		}
		text, n, err := joinChunks(chunks[0], 0, func(i int) (string, bool, error) { return chunks[i], true, nil })
		if err != nil || text != blob || n != len(chunks) {
			t.Fatalf("splitChunks(%q, %d) = %q joins as %q, %d chunks, %v", blob, max, chunks, text, n, err)
		}

		var parts []string
		if rest != "" {
			parts = strings.Split(rest, "\x00")
		}
		asked := 0
		text, n, err = joinChunks(first, 3, func(i int) (string, bool, error) {
			if asked++; i != asked {
				t.Fatalf("chunk %d asked for after %d others", i, asked-1)
			}
			if i > len(parts) {
				return "", false, nil
			}
			return parts[i-1], true, nil
		})
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("joinChunks(%q, %q): %v lacks ErrIntern", first, parts, err)
			}
		} else {
			count, head, _ := chunkCount(first)
			if n != count || n < 1 || n > len(parts)+1 || asked != n-1 || text != head+strings.Join(parts[:n-1], "") {
				t.Fatalf("joinChunks(%q, %q) = %q, %d chunks after asking for %d", first, parts, text, n, asked)
			}
		}

		kv := map[string]string{chunkKey(1, 0, 0): first}
		for i, p := range parts {
			kv[chunkKey(1, 0, i+1)] = p
		}
		st, err := StatsOfBlobs(kv)
		switch {
		case err != nil && !errors.Is(err, mpierr.ErrIntern):
			t.Fatalf("StatsOfBlobs(%q): %v lacks ErrIntern", kv, err)
		case err == nil && (st.Puts < 1 || st.Puts > len(kv) || st.Processes < 0 || st.Entries < 0 || st.ValueBytes < 0):
			t.Fatalf("StatsOfBlobs(%q) = %+v", kv, st)
		}
	})
}

// FuzzRecord: a record reaches the node leader from any local process
// that has the cookie; its header names a rank. decodeRecord refuses its
// body with ErrIntern, or returns the values of that rank, the one process
// in the body, which, sent again as a rank sends them, decode to the same
// record.
func FuzzRecord(f *testing.F) {
	rec := nodeBlob{node: map[string][]byte{"shm": []byte("seg-3")}, procs: map[int]map[string][]byte{3: {"btl.tcp.addr": []byte("10.0.0.1:4000"), "arch": {0, 1, 2}}}}
	f.Add(uint32(3), []byte(encodeBlob(rec)))
	f.Add(uint32(4), []byte(encodeBlob(rec)))
	rec.procs[5] = map[string][]byte{"arch": []byte("x")}
	f.Add(uint32(5), []byte(encodeBlob(rec)))
	f.Add(uint32(0), []byte{})
	f.Fuzz(func(t *testing.T, rank uint32, body []byte) {
		r, err := decodeRecord(int(rank), body)
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("decodeRecord(%d, %q): %v lacks ErrIntern", rank, body, err)
			}
			return
		}
		nb, _ := decodeBlob(string(body))
		if _, ok := nb.procs[int(rank)]; r.rank != int(rank) || !ok || len(nb.procs) != 1 {
			t.Fatalf("decodeRecord(%d, %q) gave rank %d's record from a blob of ranks %v", rank, body, r.rank, nb.procs)
		}
		sent := nodeBlob{node: r.node, procs: map[int]map[string][]byte{r.rank: r.proc}}
		again, err := decodeRecord(r.rank, []byte(encodeBlob(sent)))
		if err != nil {
			t.Fatalf("decodeRecord(%d, %q) = %+v, which does not decode when sent again: %v", rank, body, r, err)
		}
		if err := sameBlob(nodeBlob{node: again.node, procs: map[int]map[string][]byte{again.rank: again.proc}}, sent); err != nil {
			t.Fatalf("decodeRecord(%d, %q) = %+v, sent again: %v", rank, body, r, err)
		}
	})
}
