package plugin

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// handshake is what a plugin's first line of stdout says, in go-plugin's
// form: core-protocol|app-protocol|network|address|protocol[|cert...].
type handshake struct {
	api     int    // the app protocol: the framework's API major
	network string // "unix" or "tcp"
	addr    string
}

// maxHandshakeLine bounds the first line the host reads from a plugin
// (go-plugin's own bound: its line scanner's).
const maxHandshakeLine = 64 << 10

// handshakeError is a first line the host cannot use; notHandshake says
// whether it is no go-plugin handshake at all (rather than one the host
// refuses).
type handshakeError struct {
	line         string
	why          string
	notHandshake bool
}

func (e *handshakeError) Error() string {
	if e.notHandshake {
		return fmt.Sprintf("not a plugin: its first line of output, %q, is not a go-plugin handshake", e.line)
	}
	return fmt.Sprintf("its go-plugin handshake %q: %s", e.line, e.why)
}

// parseHandshake reads a plugin's first line of stdout. It accepts what
// go-plugin's client accepts, less what gompi does not use: the net/rpc
// protocol and TLS.
func parseHandshake(line string) (handshake, error) {
	line = strings.TrimSpace(line)
	shown := line
	if len(shown) > 200 {
		shown = shown[:200] + "…"
	}
	shown = strings.ToValidUTF8(shown, "\uFFFD")
	bad := func(format string, a ...any) (handshake, error) {
		return handshake{}, &handshakeError{line: shown, why: fmt.Sprintf(format, a...)}
	}
	parts := strings.Split(line, "|")
	if len(parts) < 4 {
		return handshake{}, &handshakeError{line: shown, notHandshake: true}
	}
	if parts[0] != "1" {
		return bad("go-plugin core protocol %q; gompi speaks 1", parts[0])
	}
	api, err := strconv.Atoi(parts[1])
	if err != nil || api < 0 {
		return bad("protocol version %q is not a number", parts[1])
	}
	hs := handshake{api: api, network: parts[2], addr: parts[3]}
	switch hs.network {
	case "unix":
		if !filepath.IsAbs(hs.addr) || strings.ContainsRune(hs.addr, 0) {
			return bad("socket %q is not an absolute path", hs.addr)
		}
	case "tcp":
		host, port, err := net.SplitHostPort(hs.addr)
		if err != nil || host == "" {
			return bad("address %q is not host:port", hs.addr)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("port %q", port)
		}
	default:
		return bad("network %q: tcp or unix", hs.network)
	}
	// go-plugin's default, when the field is missing, is net/rpc.
	proto := "netrpc"
	if len(parts) >= 5 {
		proto = parts[4]
	}
	if proto != "grpc" {
		return bad("protocol %q: gompi speaks grpc only", proto)
	}
	// go-plugin takes a sixth field longer than 50 bytes for a TLS
	// certificate; shorter is old servers' filler.
	if len(parts) >= 6 && len(parts[5]) > 50 {
		return bad("it offers TLS (a certificate), which gompi does not use: it never sets PLUGIN_CLIENT_CERT")
	}
	return hs, nil
}

// readFirstLine reads a line of at most max bytes (the rest of a longer
// one is read and dropped), without its newline; ok is false when the
// stream ended before any byte.
func readFirstLine(r *bufio.Reader, max int) (line string, ok bool, err error) {
	var b []byte
	for {
		piece, err := r.ReadSlice('\n')
		if room := max - len(b); room > 0 {
			b = append(b, piece[:min(len(piece), room)]...)
		}
		switch err {
		case nil:
			return strings.TrimSuffix(string(b), "\n"), true, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			return string(b), len(b) > 0, nil
		default:
			return string(b), len(b) > 0, err
		}
	}
}
