package plugin

import (
	"errors"
	"fmt"
	"sync"
)

// HPACK (RFC 7541), as much as the host needs: a decoder of the plugin's
// header blocks (the static and dynamic tables, Huffman strings), and an
// encoder of the host's that uses neither table nor Huffman (its few
// headers per call are not worth it). golang.org/x/net/http2/hpack would
// do, but builds its tables at every program's start; this builds its
// Huffman decoding table when a plugin first answers.

// hpackField is one header field.
type hpackField struct{ name, value string }

// hpackTableSize is the dynamic table size the host allows the plugin's
// encoder: HTTP/2's default (SETTINGS_HEADER_TABLE_SIZE), which the host
// does not change.
const hpackTableSize = 4096

// hpackDecoder decodes one connection's header blocks, in order.
type hpackDecoder struct {
	dyn  []hpackField // the dynamic table, oldest first
	size int          // its size as RFC 7541 §4.1 counts it
	max  int          // its maximum, as the plugin last set it
}

func newHpackDecoder() *hpackDecoder { return &hpackDecoder{max: hpackTableSize} }

var errHpack = errors.New("hpack: a malformed header block")

// decode reads a whole header block; its strings are bounded by the
// block's size (Huffman-coded, 8/5 of it at most).
func (d *hpackDecoder) decode(block []byte) ([]hpackField, error) {
	var fields []hpackField
	for p := block; len(p) > 0; {
		b := p[0]
		switch {
		case b&0x80 != 0: // indexed field
			i, rest, err := hpackInt(p, 7)
			if err != nil {
				return nil, err
			}
			f, err := d.at(i)
			if err != nil {
				return nil, err
			}
			fields, p = append(fields, f), rest
		case b&0xe0 == 0x20: // dynamic table size update
			if len(fields) > 0 {
				return nil, fmt.Errorf("%w: a table size update after a field", errHpack)
			}
			n, rest, err := hpackInt(p, 5)
			if err != nil {
				return nil, err
			}
			if n > hpackTableSize {
				return nil, fmt.Errorf("%w: a table of %d bytes, more than the %d allowed", errHpack, n, hpackTableSize)
			}
			d.max = int(n)
			d.evict(0)
			p = rest
		default: // a literal: with incremental indexing (01), or not (0000, 0001)
			prefix, index := uint(4), false
			if b&0xc0 == 0x40 {
				prefix, index = 6, true
			}
			i, rest, err := hpackInt(p, prefix)
			if err != nil {
				return nil, err
			}
			var f hpackField
			if i > 0 {
				named, err := d.at(i)
				if err != nil {
					return nil, err
				}
				f.name = named.name
			} else if f.name, rest, err = hpackString(rest); err != nil {
				return nil, err
			}
			if f.value, rest, err = hpackString(rest); err != nil {
				return nil, err
			}
			if index {
				d.add(f)
			}
			fields, p = append(fields, f), rest
		}
	}
	return fields, nil
}

// at is the field at index i of the static table then the dynamic one,
// newest first.
func (d *hpackDecoder) at(i uint64) (hpackField, error) {
	switch {
	case i == 0:
		return hpackField{}, fmt.Errorf("%w: index 0", errHpack)
	case i <= uint64(len(hpackStatic)):
		s := hpackStatic[i-1]
		return hpackField{s[0], s[1]}, nil
	case i-uint64(len(hpackStatic)) <= uint64(len(d.dyn)):
		return d.dyn[len(d.dyn)-int(i-uint64(len(hpackStatic)))], nil
	}
	return hpackField{}, fmt.Errorf("%w: index %d past the tables", errHpack, i)
}

func entrySize(f hpackField) int { return len(f.name) + len(f.value) + 32 }

// add puts f in the dynamic table, evicting the oldest entries to make
// room; an entry larger than the table empties it (RFC 7541 §4.4).
func (d *hpackDecoder) add(f hpackField) {
	n := entrySize(f)
	if n > d.max {
		d.dyn, d.size = d.dyn[:0], 0
		return
	}
	d.evict(n)
	d.dyn = append(d.dyn, f)
	d.size += n
}

// evict drops the oldest entries until room bytes fit.
func (d *hpackDecoder) evict(room int) {
	k := 0
	for k < len(d.dyn) && d.size+room > d.max {
		d.size -= entrySize(d.dyn[k])
		k++
	}
	if k > 0 {
		d.dyn = append(d.dyn[:0], d.dyn[k:]...)
	}
}

// hpackInt reads an integer with an n-bit prefix (RFC 7541 §5.1) from the
// start of p; values past 2^28 are refused (no header block of the host's
// size holds one).
func hpackInt(p []byte, n uint) (uint64, []byte, error) {
	if len(p) == 0 {
		return 0, nil, fmt.Errorf("%w: truncated", errHpack)
	}
	max := uint64(1)<<n - 1
	v := uint64(p[0]) & max
	p = p[1:]
	if v < max {
		return v, p, nil
	}
	for shift := uint(0); ; shift += 7 {
		if len(p) == 0 {
			return 0, nil, fmt.Errorf("%w: a truncated integer", errHpack)
		}
		if shift > 21 {
			return 0, nil, fmt.Errorf("%w: an integer too large", errHpack)
		}
		b := p[0]
		p = p[1:]
		v += uint64(b&0x7f) << shift
		if b&0x80 == 0 {
			return v, p, nil
		}
	}
}

// hpackString reads a string literal (RFC 7541 §5.2).
func hpackString(p []byte) (string, []byte, error) {
	if len(p) == 0 {
		return "", nil, fmt.Errorf("%w: a truncated string", errHpack)
	}
	huff := p[0]&0x80 != 0
	n, rest, err := hpackInt(p, 7)
	if err != nil {
		return "", nil, err
	}
	if n > uint64(len(rest)) {
		return "", nil, fmt.Errorf("%w: a string longer than its block", errHpack)
	}
	s, rest := rest[:n], rest[n:]
	if !huff {
		return string(s), rest, nil
	}
	out, err := huffDecode(s)
	return out, rest, err
}

// huffTable maps a code, as (length << 32 | bits), to its symbol; built
// when first needed.
var huffTable = sync.OnceValue(func() map[uint64]uint16 {
	m := make(map[uint64]uint16, len(huffCodes))
	for sym := range huffCodes {
		m[uint64(huffLens[sym])<<32|uint64(huffCodes[sym])] = uint16(sym)
	}
	return m
})

// huffDecode decodes a Huffman-coded string: its padding must be at most 7
// bits, all ones (EOS's first bits), and EOS itself must not appear.
func huffDecode(s []byte) (string, error) {
	table := huffTable()
	out := make([]byte, 0, len(s)*8/5)
	var code uint64
	var n uint
	for _, b := range s {
		for bit := 7; bit >= 0; bit-- {
			code = code<<1 | uint64(b>>uint(bit)&1)
			n++
			if n < 5 {
				continue
			}
			if n > 30 {
				return "", fmt.Errorf("%w: a Huffman code longer than 30 bits", errHpack)
			}
			sym, ok := table[uint64(n)<<32|code]
			if !ok {
				continue
			}
			if sym == 256 {
				return "", fmt.Errorf("%w: EOS in a Huffman string", errHpack)
			}
			out = append(out, byte(sym))
			code, n = 0, 0
		}
	}
	if n > 7 || code != uint64(1)<<n-1 {
		return "", fmt.Errorf("%w: bad Huffman padding", errHpack)
	}
	return string(out), nil
}

// appendHpackInt appends v with an n-bit prefix, first holding the
// representation's flag bits.
func appendHpackInt(b []byte, n uint, first byte, v int) []byte {
	max := 1<<n - 1
	if v < max {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(max))
	for v -= max; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

// appendHpackLiteral appends a field as a literal without indexing, with
// its name literal too, neither Huffman-coded (RFC 7541 §6.2.2).
func appendHpackLiteral(b []byte, name, value string) []byte {
	b = append(b, 0x00)
	b = appendHpackInt(b, 7, 0, len(name))
	b = append(b, name...)
	b = appendHpackInt(b, 7, 0, len(value))
	return append(b, value...)
}
