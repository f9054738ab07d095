package plugin

import (
	"bytes"
	"fmt"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// The static table and the Huffman code are RFC 7541's, as
// golang.org/x/net/http2/hpack (grpc-go's encoder) has them: each static
// index decodes to its field there and here, and each byte's Huffman code
// there decodes to that byte here.
func TestHpackTables(t *testing.T) {
	ref := hpack.NewDecoder(4096, nil)
	for i := 1; i <= len(hpackStatic); i++ {
		want, err := ref.DecodeFull([]byte{0x80 | byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := newHpackDecoder().decode([]byte{0x80 | byte(i)})
		if err != nil || len(got) != 1 || got[0].name != want[0].Name || got[0].value != want[0].Value {
			t.Errorf("static index %d: %v, %v; want %v", i, got, err, want)
		}
	}
	for c := 0; c < 256; c++ {
		s := string([]byte{byte(c)})
		if got, err := huffDecode(hpack.AppendHuffmanString(nil, s)); err != nil || got != s {
			t.Errorf("byte %#x Huffman-coded: %q, %v", c, got, err)
		}
	}
}

// The host's own encoding of its request headers decodes, in x/net's
// decoder, to the fields it meant.
func TestHpackLiteralEncoding(t *testing.T) {
	long := string(bytes.Repeat([]byte("v"), 300))
	var block []byte
	want := [][2]string{{":path", "/gompi.plugin.v1.Component/Query"}, {"x", long}, {"", ""}}
	for _, f := range want {
		block = appendHpackLiteral(block, f[0], f[1])
	}
	got, err := hpack.NewDecoder(4096, nil).DecodeFull(block)
	if err != nil || len(got) != len(want) {
		t.Fatalf("%v, %v", got, err)
	}
	for i, f := range got {
		if f.Name != want[i][0] || f.Value != want[i][1] {
			t.Errorf("field %d: %s=%.40q, want %s=%.40q", i, f.Name, f.Value, want[i][0], want[i][1])
		}
	}
}

// fieldsFrom makes header fields of fuzz bytes: names and values cut at
// zero bytes, in pairs.
func fieldsFrom(b []byte) []hpack.HeaderField {
	parts := bytes.Split(b, []byte{0})
	var fs []hpack.HeaderField
	for i := 0; i+1 < len(parts); i += 2 {
		fs = append(fs, hpack.HeaderField{Name: string(parts[i]), Value: string(parts[i+1]), Sensitive: len(parts[i])%3 == 1})
	}
	return fs
}

// FuzzHpack: header blocks as grpc-go's encoder (x/net's) writes them,
// with its dynamic table, Huffman strings and table size updates, decode
// here to the fields it encoded, block after block; and any bytes at all
// decode or fail, never panic.
func FuzzHpack(f *testing.F) {
	f.Add([]byte(":status\x00200\x00content-type\x00application/grpc\x00grpc-status\x000\x00grpc-message\x00no%20such"), uint16(4096))
	f.Add([]byte("a\x00b\x00a\x00b\x00custom-key\x00custom-value"), uint16(0))
	f.Add([]byte{0x3f, 0xe1, 0x1f, 0x82}, uint16(100))
	f.Fuzz(func(t *testing.T, in []byte, tableSize uint16) {
		_, _ = newHpackDecoder().decode(in)
		var buf bytes.Buffer
		enc := hpack.NewEncoder(&buf)
		dec := newHpackDecoder()
		fields := fieldsFrom(in)
		for block := 0; block < 3; block++ {
			buf.Reset()
			if block == 1 {
				enc.SetMaxDynamicTableSize(uint32(tableSize) % (hpackTableSize + 1))
			}
			for _, fl := range fields {
				if err := enc.WriteField(fl); err != nil {
					t.Fatal(err)
				}
			}
			got, err := dec.decode(buf.Bytes())
			if err != nil {
				t.Fatalf("block %d of %v: %v", block, fields, err)
			}
			if fmt.Sprint(len(got)) != fmt.Sprint(len(fields)) {
				t.Fatalf("block %d: %d fields, want %d", block, len(got), len(fields))
			}
			for i, fl := range fields {
				if got[i].name != fl.Name || got[i].value != fl.Value {
					t.Fatalf("block %d, field %d: %q=%q, want %q=%q", block, i, got[i].name, got[i].value, fl.Name, fl.Value)
				}
			}
		}
	})
}
