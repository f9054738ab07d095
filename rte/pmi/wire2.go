package pmi

// The PMI-2 wire, as Slurm's mpi/pmi2 plugin (srun --mpi=pmi2) and Hydra
// speak it.
//
// The conversation opens with one PMI-1 line, "cmd=init pmi_version=2
// pmi_subversion=0\n", answered by a PMI-1 line; the client must wait for
// that answer before it sends anything else (Slurm reads the init with one
// read() and drops whatever follows it in the same burst). After it, every
// message is a frame: 6 ASCII bytes holding the decimal length of the body
// (blank-padded on either side, or zero-padded: readers parse it as a
// number), then the body "cmd=<name>;key=value;…;" in which ';' ends every
// pair. Values may hold '=' and blanks but never ';': Slurm implements no
// escape for it (a value "a;b" is stored as "a"), so Frame refuses one.

import (
	"io"
	"strconv"
	"strings"

	"github.com/gompi/gompi/mpierr"
)

const (
	// FrameHeader is the size of a frame's length field.
	FrameHeader = 6
	// MaxFrame bounds a frame's body, in both directions: the PMI-2
	// specification's longest command (PMII_MAX_COMMAND_LEN).
	MaxFrame = 64 << 10
	// MaxKey2 and MaxValue2 are PMI-2's key and value limits
	// (PMI2_MAX_KEYLEN, PMI2_MAX_VALLEN). Slurm checks neither, but a value
	// much larger than 1 KiB corrupts its stepd's KVS buffer.
	MaxKey2   = 64
	MaxValue2 = 1024
)

// Frame returns the PMI-2 wire form of c: the length field, right-aligned as
// MPICH writes it, then the body. Names and keys must be non-empty and hold
// no ';', '=' or NUL; values no ';' or NUL. Errors carry mpierr.ErrArg.
func (c Command) Frame() ([]byte, error) {
	if err := checkToken2("command name", c.Name, true); err != nil {
		return nil, err
	}
	n := len("cmd=;") + len(c.Name)
	for _, a := range c.Args {
		if err := checkToken2("key", a.Key, true); err != nil {
			return nil, err
		}
		if err := checkToken2("value of "+a.Key, a.Value, false); err != nil {
			return nil, err
		}
		n += len(a.Key) + len(a.Value) + 2
	}
	if n > MaxFrame {
		return nil, mpierr.Errorf(mpierr.ErrArg, "pmi2: cmd=%s of %d bytes exceeds %d", abbreviate(c.Name), n, MaxFrame)
	}
	b := make([]byte, 0, FrameHeader+n)
	b = append(b, pad6(n)...)
	b = append(b, "cmd="...)
	b = append(b, c.Name...)
	b = append(b, ';')
	for _, a := range c.Args {
		b = append(b, a.Key...)
		b = append(b, '=')
		b = append(b, a.Value...)
		b = append(b, ';')
	}
	return b, nil
}

// pad6 writes n right-aligned in 6 bytes (n <= MaxFrame < 10^6).
func pad6(n int) string {
	s := strconv.Itoa(n)
	return strings.Repeat(" ", FrameHeader-len(s)) + s
}

func checkToken2(what, s string, isKey bool) error {
	if isKey && s == "" {
		return mpierr.Errorf(mpierr.ErrArg, "pmi2: empty %s", what)
	}
	bad := ";\x00"
	if isKey {
		bad = ";=\x00"
	}
	if i := strings.IndexAny(s, bad); i >= 0 {
		return mpierr.Errorf(mpierr.ErrArg, "pmi2: %s %q holds %q, which PMI-2 cannot carry", what, abbreviate(s), s[i])
	}
	return nil
}

// ReadFrame reads one frame and returns its body. A connection that ends
// before the first byte gives io.EOF, one that ends inside a frame
// io.ErrUnexpectedEOF; a length field that is not a number of 1 to MaxFrame
// is an error of class mpierr.ErrIntern.
func ReadFrame(r io.Reader) (string, error) {
	var hdr [FrameHeader]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", err
	}
	n, err := parseFrameLength(hdr[:])
	if err != nil {
		return "", err
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	return string(body), nil
}

// parseFrameLength reads a length field: digits, with blanks on either side
// (Slurm pads on the right, MPICH on the left).
func parseFrameLength(hdr []byte) (int, error) {
	s := strings.Trim(string(hdr), " ")
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			n = -1
			break
		}
		n = n*10 + int(s[i]-'0')
	}
	if s == "" || n < 1 || n > MaxFrame {
		return 0, mpierr.Errorf(mpierr.ErrIntern, "pmi2: frame length field %q is not a length of 1 to %d", hdr, MaxFrame)
	}
	return n, nil
}

// ParseFrame parses a frame's body: "cmd=<name>;" then key=value pairs,
// each ended by ';' (the last one's ';' may be missing). A value runs to the
// next ';' and may hold '='. Errors carry mpierr.ErrIntern: a malformed
// frame is a protocol violation by the peer.
func ParseFrame(body string) (Command, error) {
	if len(body) > MaxFrame {
		return Command{}, mpierr.Errorf(mpierr.ErrIntern, "pmi2: frame of %d bytes exceeds %d", len(body), MaxFrame)
	}
	rest := body
	var c Command
	first := true
	for rest != "" {
		pair, after, _ := strings.Cut(rest, ";")
		rest = after
		k, v, ok := strings.Cut(pair, "=")
		if first {
			if !ok || k != "cmd" || v == "" || strings.Contains(v, "=") {
				return Command{}, mpierr.Errorf(mpierr.ErrIntern, "pmi2: frame %q does not start with cmd=<name>;", abbreviate(body))
			}
			c.Name, first = v, false
			continue
		}
		if !ok || k == "" {
			return Command{}, mpierr.Errorf(mpierr.ErrIntern, "pmi2: pair %q in frame %q is not key=value", abbreviate(pair), abbreviate(body))
		}
		c.Args = append(c.Args, Arg{k, v})
	}
	if first {
		return Command{}, mpierr.Errorf(mpierr.ErrIntern, "pmi2: empty frame")
	}
	return c, nil
}

// rcError2 turns a PMI-2 response's rc/errmsg into an error, or nil for rc=0.
// A response without rc is a protocol violation: every PMI-2 response has one.
func rcError2(c Command, what string) error {
	rc, ok := c.Get("rc")
	if !ok {
		return mpierr.Errorf(mpierr.ErrIntern, "pmi2: %s response %q has no rc", what, abbreviate(c.String()))
	}
	if rc == "0" {
		return nil
	}
	msg, _ := c.Get("errmsg")
	return mpierr.Errorf(mpierr.ErrOther, "pmi2: %s failed: rc=%s %s", what, rc, msg)
}

// boolArg reads a PMI-2 boolean (TRUE or FALSE; case is not trusted).
func boolArg(c Command, key string) (bool, error) {
	v, _ := c.Get(key)
	switch strings.ToUpper(v) {
	case "TRUE":
		return true, nil
	case "FALSE":
		return false, nil
	}
	return false, mpierr.Errorf(mpierr.ErrIntern, "pmi2: %s=%q in %q is not TRUE or FALSE", key, v, abbreviate(c.String()))
}
