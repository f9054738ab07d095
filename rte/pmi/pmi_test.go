package pmi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gompi/gompi/internal/strangers"
	"github.com/gompi/gompi/mpierr"
)

// liveness bounds every wait for something that must happen; tests assert
// behaviour, and this only keeps a broken build from hanging.
const liveness = 5 * time.Second

// transcriptLine is one line of testdata/hydra-pmi1-transcript.txt.
type transcriptLine struct {
	fromClient bool // '>' lines are written by the rank, '<' lines by Hydra
	text       string
}

// readTranscript returns the lines of the Hydra transcript without the
// direction markers.
func readTranscript(t testing.TB) []transcriptLine {
	t.Helper()
	data, err := os.ReadFile("testdata/hydra-pmi1-transcript.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []transcriptLine
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "> "):
			out = append(out, transcriptLine{true, strings.TrimPrefix(l, "> ")})
		case strings.HasPrefix(l, "< "):
			out = append(out, transcriptLine{false, strings.TrimPrefix(l, "< ")})
		case strings.HasPrefix(l, "#") || l == "":
		default:
			t.Fatalf("transcript line %q has no direction", l)
		}
	}
	if len(out) == 0 {
		t.Fatal("empty transcript")
	}
	return out
}

// hydraKVS is the KVS name Hydra chose in the transcript.
const hydraKVS = "kvs_1440_0_917003564_vm"

func args(kv ...string) []Arg {
	var out []Arg
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Arg{kv[i], kv[i+1]})
	}
	return out
}

// TestParseTranscript parses every line of the Hydra transcript, checks the
// command name and arguments, and re-encodes it to the same bytes.
func TestParseTranscript(t *testing.T) {
	want := []Command{
		{"init", args("pmi_version", "1", "pmi_subversion", "1")},
		{"response_to_init", args("pmi_version", "1", "pmi_subversion", "1", "rc", "0")},
		{"get_maxes", nil},
		{"maxes", args("kvsname_max", "256", "keylen_max", "64", "vallen_max", "1024")},
		{"get_appnum", nil},
		{"appnum", args("appnum", "0")},
		{"get_my_kvsname", nil},
		{"my_kvsname", args("kvsname", hydraKVS)},
		{"get_universe_size", nil},
		{"universe_size", args("size", "-1")},
		{"put", args("kvsname", hydraKVS, "key", "card-0", "value", "addr-of-0")},
		{"put_result", args("rc", "0", "msg", "success")},
		{"barrier_in", nil},
		{"barrier_out", nil},
		{"get", args("kvsname", hydraKVS, "key", "card-1")},
		{"get_result", args("rc", "0", "msg", "success", "value", "addr-of-1")},
		{"get", args("kvsname", hydraKVS, "key", "nosuchkey")},
		{"get_result", args("rc", "-1", "msg", "key_nosuchkey_not_found", "value", "unknown")},
		{"finalize", nil},
		{"finalize_ack", nil},
	}
	lines := readTranscript(t)
	if len(lines) != len(want) {
		t.Fatalf("transcript has %d lines, the table %d", len(lines), len(want))
	}
	for i, l := range lines {
		t.Run(fmt.Sprintf("%02d_%s", i, want[i].Name), func(t *testing.T) {
			got, err := ParseLine(l.text)
			if err != nil {
				t.Fatalf("ParseLine(%q): %v", l.text, err)
			}
			if !reflect.DeepEqual(got, want[i]) {
				t.Fatalf("ParseLine(%q) = %#v, want %#v", l.text, got, want[i])
			}
			if enc := string(got.Encode()); enc != l.text+"\n" {
				t.Fatalf("Encode = %q, want %q", enc, l.text+"\n")
			}
			if s := got.String(); s != l.text {
				t.Fatalf("String = %q, want %q", s, l.text)
			}
			// Building the command with Cmd gives the same line.
			var kv []string
			for _, a := range want[i].Args {
				kv = append(kv, a.Key, a.Value)
			}
			if enc := string(Cmd(want[i].Name, kv...).Encode()); enc != l.text+"\n" {
				t.Fatalf("Cmd(...).Encode = %q, want %q", enc, l.text+"\n")
			}
		})
	}
}

func TestCommandGet(t *testing.T) {
	c, err := ParseLine("cmd=get_result rc=-1 msg=key_nosuchkey_not_found value=unknown rc=5")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := c.Get("rc"); !ok || v != "-1" {
		t.Errorf("Get(rc) = %q, %v; want the first rc, -1", v, ok)
	}
	if _, ok := c.Get("found"); ok {
		t.Error("Get(found) reported a key that is not there")
	}
	if err := rcError(c, "get"); !errors.Is(err, mpierr.ErrOther) || !strings.Contains(err.Error(), "key_nosuchkey_not_found") {
		t.Errorf("rcError = %v, want an ErrOther naming the message", err)
	}
	ok, _ := ParseLine("cmd=barrier_out")
	if err := rcError(ok, "barrier"); err != nil {
		t.Errorf("rcError of a response without rc = %v, want nil", err)
	}
}

func TestParseLineForms(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Command
	}{
		{"cmd=barrier_in\r", Command{"barrier_in", nil}},
		{"  cmd=put \t key=a   value=b  ", Command{"put", args("key", "a", "value", "b")}},
		{"mcmd=spawn", Command{"spawn", nil}},
		{"cmd=spawn endcmd", Command{"spawn", args("endcmd", "")}},
		{"cmd=put key=k value=a=b", Command{"put", args("key", "k", "value", "a=b")}},
		{"cmd=put key=k value=", Command{"put", args("key", "k", "value", "")}},
		{`cmd=abort exitcode=3 message=a\ b\\c\nd`, Command{"abort", args("exitcode", "3", "message", "a b\\c\nd")}},
		{`cmd=put k\ ey=1 value=v`, Command{"put", args("k ey", "1", "value", "v")}},
		{`cmd=put key=k\ 1`, Command{"put", args("key", "k 1")}},
	} {
		got, err := ParseLine(tc.line)
		if err != nil {
			t.Errorf("ParseLine(%q): %v", tc.line, err)
			continue
		}
		// Compare the names and arguments only; nil and empty argument
		// lists are the same command.
		if got.Name != tc.want.Name || len(got.Args) != len(tc.want.Args) || (len(got.Args) > 0 && !reflect.DeepEqual(got.Args, tc.want.Args)) {
			t.Errorf("ParseLine(%q) = %#v, want %#v", tc.line, got, tc.want)
		}
	}
}

func TestParseLineMalformed(t *testing.T) {
	for _, tc := range []struct{ name, line string }{
		{"empty", ""},
		{"blank", "   \t "},
		{"only CR", "\r"},
		{"no cmd", "key=value"},
		{"cmd not first", "key=value cmd=put"},
		{"bare cmd", "cmd"},
		{"empty name", "cmd="},
		{"empty name with args", "cmd= key=v"},
		{"token without key", "cmd=put =x"},
		{"token without key, escaped", `cmd=put \=x`},
		{"lone trailing backslash", `cmd=put key=a\`},
		{"lone trailing backslash before CR", "cmd=put key=a\\\r"},
		{"NUL", "cmd=put key=a\x00b"},
		{"NUL in name", "cmd=pu\x00t"},
		{"newline", "cmd=put key=a\nb"},
		{"newline at end", "cmd=put key=a\n"},
		{"over MaxLine", "cmd=put value=" + strings.Repeat("v", MaxLine)},
	} {
		c, err := ParseLine(tc.line)
		if err == nil {
			t.Errorf("%s: ParseLine(%q) = %v, want an error", tc.name, abbreviate(tc.line), c)
			continue
		}
		if !errors.Is(err, mpierr.ErrIntern) {
			t.Errorf("%s: ParseLine error %v does not carry ErrIntern", tc.name, err)
		}
	}
	// Exactly MaxLine bytes is still accepted.
	line := "cmd=put value="
	line += strings.Repeat("v", MaxLine-len(line))
	if _, err := ParseLine(line); err != nil {
		t.Errorf("a line of exactly MaxLine bytes: %v", err)
	}
}

func TestEscapeRoundTrip(t *testing.T) {
	for _, v := range []string{
		"plain",
		"",
		"with space",
		"  leading and trailing  ",
		`back\slash`,
		`\`,
		`\\`,
		`\n`,
		"new\nline",
		`C:\Program Files\gompi\ "quoted" \ end\`,
		"a=b=c",
		"rank 3 called Abort(3): disk full\\",
	} {
		c := Cmd("abort", "exitcode", "3", "message", v)
		enc := c.Encode()
		if !bytes.HasSuffix(enc, []byte("\n")) || bytes.Count(enc, []byte("\n")) != 1 {
			t.Errorf("Encode(%q) = %q: want exactly one newline, at the end", v, enc)
			continue
		}
		got, err := ParseLine(strings.TrimSuffix(string(enc), "\n"))
		if err != nil {
			t.Errorf("ParseLine(Encode(%q)) = %v", v, err)
			continue
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("value %q: round trip gave %#v, want %#v", v, got, c)
		}
	}
	// The escaped form is what MPICH expects: a backslash before the blank
	// or backslash.
	if got := Cmd("abort", "message", `a b\c`).String(); got != `cmd=abort message=a\ b\\c` {
		t.Errorf("escaped form = %q", got)
	}
	// A key with a blank round-trips too.
	c := Cmd("put", "odd key", "v")
	if got, err := ParseLine(c.String()); err != nil || !reflect.DeepEqual(got, c) {
		t.Errorf("key with a blank: %#v, %v", got, err)
	}
}

// lossy reports whether a command holds a control byte other than tab, CR
// and newline: Encode writes those as '?' (they cannot travel in a C
// string), so such a command does not round-trip.
func lossy(c Command) bool {
	has := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if b := s[i]; (b < ' ' && b != '\t' && b != '\r' && b != '\n') || b == 0x7f {
				return true
			}
		}
		return false
	}
	if has(c.Name) {
		return true
	}
	for _, a := range c.Args {
		if has(a.Key) || has(a.Value) {
			return true
		}
	}
	return false
}

// TestEncodeControlBytes: tab, CR and newline survive Encode/ParseLine;
// other control bytes, NUL among them, cannot travel in a C string and
// become '?', so the line still parses.
func TestEncodeControlBytes(t *testing.T) {
	for v, want := range map[string]string{"a\tb": "a\tb", "tab\t": "tab\t", "cr\r": "cr\r", "nul\x00": "nul?", "bell\x07\x7f": "bell??"} {
		c := Cmd("abort", "exitcode", "1", "message", v)
		got, err := ParseLine(strings.TrimSuffix(string(c.Encode()), "\n"))
		if err != nil {
			t.Errorf("value %q: ParseLine(Encode) = %v", v, err)
			continue
		}
		if m, _ := got.Get("message"); m != want {
			t.Errorf("value %q: round trip gave %q, want %q", v, m, want)
		}
	}
}

// socketPair returns two connected Unix stream sockets, as a launcher gives a
// rank (PMI_FD).
func socketPair(t testing.TB) (*net.UnixConn, *net.UnixConn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("socketpair: %v", err)
	}
	var conns [2]*net.UnixConn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pmi")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c.(*net.UnixConn)
	}
	return conns[0], conns[1]
}

// recorder collects a server's events.
type recorder struct {
	mu      sync.Mutex
	inits   []int
	puts    []putEvent
	finals  []int
	aborts  []abortEvent
	lost    [][2]int // PeerLost: rank, peer
	errs    []error
	finalCh chan int
	abortCh chan abortEvent
}

type putEvent struct {
	rank       int
	key, value string
	lineBytes  int
}

type abortEvent struct {
	rank, code int
	msg        string
}

func newRecorder() *recorder {
	return &recorder{finalCh: make(chan int, 16), abortCh: make(chan abortEvent, 16)}
}

func (r *recorder) events() Events {
	return Events{
		Init: func(rank int) { r.mu.Lock(); r.inits = append(r.inits, rank); r.mu.Unlock() },
		Put: func(rank int, key, value string, lineBytes int) {
			r.mu.Lock()
			r.puts = append(r.puts, putEvent{rank, key, value, lineBytes})
			r.mu.Unlock()
		},
		Finalize: func(rank int) {
			r.mu.Lock()
			r.finals = append(r.finals, rank)
			r.mu.Unlock()
			r.finalCh <- rank
		},
		Abort: func(rank, code int, msg string) {
			e := abortEvent{rank, code, msg}
			r.mu.Lock()
			r.aborts = append(r.aborts, e)
			r.mu.Unlock()
			r.abortCh <- e
		},
		Error:    func(rank int, err error) { r.mu.Lock(); r.errs = append(r.errs, err); r.mu.Unlock() },
		PeerLost: func(rank, peer int) { r.mu.Lock(); r.lost = append(r.lost, [2]int{rank, peer}); r.mu.Unlock() },
	}
}

// job is a Server with ranks connected to it over socketpairs.
type job struct {
	t      *testing.T
	srv    *Server
	rec    *recorder
	size   int
	served []chan error // Serve's result per rank
	lost   []*lostCounter
}

type lostCounter struct {
	mu   sync.Mutex
	n    int
	errs []error
}

func (l *lostCounter) onLost(err error) {
	l.mu.Lock()
	l.n++
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *lostCounter) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

const testKVS = "gompi-c0ffee01"

func newJob(t *testing.T, size int, cfg ServerConfig) *job {
	rec := newRecorder()
	cfg.Size = size
	if cfg.KVSName == "" {
		cfg.KVSName = testKVS
	}
	cfg.Events = rec.events()
	j := &job{t: t, srv: NewServer(cfg), rec: rec, size: size,
		served: make([]chan error, size), lost: make([]*lostCounter, size)}
	t.Cleanup(j.srv.Shutdown)
	return j
}

// connect starts serving rank and returns its client, initialised.
func (j *job) connect(rank int) *Client {
	j.t.Helper()
	cc, sc := socketPair(j.t)
	done := make(chan error, 1)
	j.served[rank] = done
	go func() { done <- j.srv.Serve(rank, sc) }()
	j.lost[rank] = &lostCounter{}
	c, err := NewClient(cc, rank, j.size, ClientOptions{OnLost: j.lost[rank].onLost})
	if err != nil {
		j.t.Fatalf("rank %d: NewClient: %v", rank, err)
	}
	j.t.Cleanup(func() { c.Close() })
	return c
}

// waitServed waits for Serve of rank to return and gives its result.
func (j *job) waitServed(rank int) error {
	j.t.Helper()
	select {
	case err := <-j.served[rank]:
		return err
	case <-time.After(liveness):
		j.t.Fatalf("Serve of rank %d did not return within %v", rank, liveness)
		return nil
	}
}

func TestClientInit(t *testing.T) {
	j := newJob(t, 2, ServerConfig{Appnum: 3})
	c := j.connect(1)
	if c.Rank != 1 || c.Size != 2 {
		t.Errorf("rank, size = %d, %d; want 1, 2", c.Rank, c.Size)
	}
	if c.Appnum != 3 {
		t.Errorf("appnum = %d, want 3", c.Appnum)
	}
	if c.KVSName != testKVS {
		t.Errorf("kvsname = %q, want %q", c.KVSName, testKVS)
	}
	if c.MaxKey != MaxKeyLen || c.MaxValue != DefaultMaxValue {
		t.Errorf("maxes = %d, %d; want %d, %d", c.MaxKey, c.MaxValue, MaxKeyLen, DefaultMaxValue)
	}
	j.rec.mu.Lock()
	inits := append([]int(nil), j.rec.inits...)
	j.rec.mu.Unlock()
	if !reflect.DeepEqual(inits, []int{1}) {
		t.Errorf("Init events = %v, want [1]", inits)
	}
	// The handshake is exactly four requests.
	want := len(Cmd("init", "pmi_version", "1", "pmi_subversion", "1").Encode()) +
		len(Cmd("get_maxes").Encode()) + len(Cmd("get_appnum").Encode()) + len(Cmd("get_my_kvsname").Encode())
	if got := c.BytesWritten(); got != int64(want) {
		t.Errorf("BytesWritten after init = %d, want %d", got, want)
	}
}

func TestClientPutGet(t *testing.T) {
	j := newJob(t, 2, ServerConfig{Preput: map[string]string{"PMI_process_mapping": "(vector,(0,1,2))"}})
	c0, c1 := j.connect(0), j.connect(1)

	if v, found, err := c1.Get("PMI_process_mapping"); err != nil || !found || v != "(vector,(0,1,2))" {
		t.Errorf("Get of a preput key = %q, %v, %v", v, found, err)
	}

	before := c0.BytesWritten()
	value := `addr of 0 \ with blanks`
	if err := c0.Put("card-0", value); err != nil {
		t.Fatalf("Put: %v", err)
	}
	wire := len(Cmd("put", "kvsname", testKVS, "key", "card-0", "value", value).Encode())
	if got := c0.BytesWritten() - before; got != int64(wire) {
		t.Errorf("Put wrote %d bytes, want %d", got, wire)
	}
	if err := c1.Put("card-1", "addr-of-1"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	barrier(t, c0, c1)
	for _, c := range []*Client{c0, c1} {
		if v, found, err := c.Get("card-0"); err != nil || !found || v != value {
			t.Errorf("rank %d: Get(card-0) = %q, %v, %v", c.Rank, v, found, err)
		}
		if v, found, err := c.Get("card-1"); err != nil || !found || v != "addr-of-1" {
			t.Errorf("rank %d: Get(card-1) = %q, %v, %v", c.Rank, v, found, err)
		}
	}
	if v, ok := j.srv.Value("card-0"); !ok || v != value {
		t.Errorf("server Value(card-0) = %q, %v", v, ok)
	}

	// A miss is not an error.
	if v, found, err := c1.Get("nosuchkey"); err != nil || found || v != "" {
		t.Errorf("Get of a missing key = %q, %v, %v; want \"\", false, nil", v, found, err)
	}

	// Events.Put saw the exact lines.
	j.rec.mu.Lock()
	puts := append([]putEvent(nil), j.rec.puts...)
	j.rec.mu.Unlock()
	want := []putEvent{
		{0, "card-0", value, wire},
		{1, "card-1", "addr-of-1", len(Cmd("put", "kvsname", testKVS, "key", "card-1", "value", "addr-of-1").Encode())},
	}
	if !reflect.DeepEqual(puts, want) {
		t.Errorf("Put events = %+v, want %+v", puts, want)
	}
}

func barrier(t *testing.T, cs ...*Client) {
	t.Helper()
	errs := make(chan error, len(cs))
	for _, c := range cs {
		go func() { errs <- c.Barrier() }()
	}
	for range cs {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("Barrier: %v", err)
			}
		case <-time.After(liveness):
			t.Fatal("Barrier did not complete")
		}
	}
}

func TestClientPutRejected(t *testing.T) {
	j := newJob(t, 1, ServerConfig{MaxValue: 100})
	c := j.connect(0)
	if c.MaxValue != 100 {
		t.Fatalf("MaxValue = %d, want the advertised 100", c.MaxValue)
	}

	// Reserved keys.
	if err := c.Put("PMI_process_mapping", "(vector,(0,1,1))"); err == nil {
		t.Error("Put of a PMI_ key succeeded")
	} else if !strings.Contains(err.Error(), "key_reserved") {
		t.Errorf("Put of a PMI_ key: %v, want the server's key_reserved", err)
	}
	if _, ok := j.srv.Value("PMI_process_mapping"); ok {
		t.Error("the reserved key was stored")
	}

	// Duplicates: the first value stays.
	if err := c.Put("k", "first"); err != nil {
		t.Fatal(err)
	}
	if err := c.Put("k", "second"); err == nil {
		t.Error("duplicate Put succeeded")
	}
	if v, found, err := c.Get("k"); err != nil || !found || v != "first" {
		t.Errorf("after a duplicate Put, Get = %q, %v, %v; want first", v, found, err)
	}

	// Too long: the client refuses without sending.
	before := c.BytesWritten()
	err := c.Put("long", strings.Repeat("x", 101))
	if !errors.Is(err, mpierr.ErrArg) {
		t.Errorf("Put of 101 bytes with vallen_max=100: %v, want ErrArg", err)
	}
	if c.BytesWritten() != before {
		t.Errorf("the client sent %d bytes for a value it should have refused", c.BytesWritten()-before)
	}
	if err := c.Put(strings.Repeat("k", MaxKeyLen+1), "v"); !errors.Is(err, mpierr.ErrArg) {
		t.Errorf("Put of a %d-byte key: %v, want ErrArg", MaxKeyLen+1, err)
	}
	// Hydra's limits count a C string's NUL: exactly vallen_max is too long,
	// one byte less is fine.
	if err := c.Put("edge", strings.Repeat("x", 100)); !errors.Is(err, mpierr.ErrArg) {
		t.Errorf("Put of exactly vallen_max bytes: %v, want ErrArg", err)
	}
	if err := c.Put("edge", strings.Repeat("x", 99)); err != nil {
		t.Errorf("Put of vallen_max-1 bytes: %v", err)
	}

	// Only the two accepted puts reached Events.Put.
	j.rec.mu.Lock()
	n := len(j.rec.puts)
	j.rec.mu.Unlock()
	if n != 2 {
		t.Errorf("%d Put events, want 2", n)
	}
	// The connection is still usable.
	if _, _, err := c.Get("k"); err != nil {
		t.Errorf("Get after refused puts: %v", err)
	}
}

func TestBarrierWaitsForAll(t *testing.T) {
	j := newJob(t, 3, ServerConfig{})
	cs := []*Client{j.connect(0), j.connect(1), j.connect(2)}
	done := make(chan int, 3)
	errs := make(chan error, 3)
	enter := func(c *Client) {
		go func() {
			if err := c.Barrier(); err != nil {
				errs <- err
				return
			}
			done <- c.Rank
		}()
	}
	for round := 0; round < 2; round++ { // the barrier can be reused
		enter(cs[0])
		enter(cs[1])
		select {
		case r := <-done:
			t.Fatalf("round %d: rank %d left a barrier only 2 of 3 entered", round, r)
		case err := <-errs:
			t.Fatalf("round %d: %v", round, err)
		case <-time.After(100 * time.Millisecond):
		}
		enter(cs[2])
		for i := 0; i < 3; i++ {
			select {
			case <-done:
			case err := <-errs:
				t.Fatalf("round %d: %v", round, err)
			case <-time.After(liveness):
				t.Fatalf("round %d: the barrier did not release all 3 ranks", round)
			}
		}
	}
}

func TestFinalize(t *testing.T) {
	j := newJob(t, 2, ServerConfig{})
	c := j.connect(1)
	if err := c.Finalize(); err != nil {
		t.Fatalf("Finalize: %v", err)
	}
	select {
	case r := <-j.rec.finalCh:
		if r != 1 {
			t.Errorf("Finalize event for rank %d, want 1", r)
		}
	case <-time.After(liveness):
		t.Fatal("no Finalize event")
	}
	if err := j.waitServed(1); err != nil {
		t.Errorf("Serve after finalize = %v, want nil", err)
	}
	// The server closing now, and its Shutdown, are expected: no OnLost.
	j.srv.Shutdown()
	select {
	case <-c.Lost():
	case <-time.After(liveness):
		t.Fatal("Lost not closed after the connection ended")
	}
	time.Sleep(100 * time.Millisecond) // OnLost would run right after Lost closes
	if n := j.lost[1].count(); n != 0 {
		t.Errorf("OnLost called %d times after Finalize", n)
	}
	// A request now fails with ErrLost.
	if _, _, err := c.Get("x"); !errors.Is(err, ErrLost) {
		t.Errorf("Get after Finalize: %v, want ErrLost", err)
	}
}

func TestAbort(t *testing.T) {
	j := newJob(t, 2, ServerConfig{})
	c := j.connect(0)
	msg := `rank 0 called Abort(7): disk full \ quota exceeded`
	if err := c.Abort(7, msg); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	select {
	case e := <-j.rec.abortCh:
		if e != (abortEvent{0, 7, msg}) {
			t.Errorf("Abort event = %+v, want rank 0 code 7 message %q", e, msg)
		}
	case <-time.After(liveness):
		t.Fatal("no Abort event")
	}
	if err := j.waitServed(0); err != nil {
		t.Errorf("Serve after abort = %v, want nil", err)
	}
	select {
	case <-c.Lost():
	case <-time.After(liveness):
		t.Fatal("Lost not closed after the server ended the conversation")
	}
	time.Sleep(100 * time.Millisecond)
	if n := j.lost[0].count(); n != 0 {
		t.Errorf("OnLost called %d times after Abort", n)
	}
	j.rec.mu.Lock()
	defer j.rec.mu.Unlock()
	if len(j.rec.errs) != 0 {
		t.Errorf("Error events: %v", j.rec.errs)
	}
}

func TestAbortCodeDefault(t *testing.T) {
	j := newJob(t, 1, ServerConfig{})
	cc, sc := socketPair(t)
	go j.srv.Serve(0, sc)
	defer cc.Close()
	if _, err := cc.Write([]byte("cmd=abort exitcode=notanumber\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-j.rec.abortCh:
		if e.code != 1 || e.msg != "" {
			t.Errorf("Abort event = %+v, want code 1 and no message", e)
		}
	case <-time.After(liveness):
		t.Fatal("no Abort event")
	}
}

func TestLossDetection(t *testing.T) {
	j := newJob(t, 3, ServerConfig{})
	c0, c1 := j.connect(0), j.connect(1)
	errc := make(chan error, 1)
	go func() { errc <- c0.Barrier() }()
	select {
	case err := <-errc:
		t.Fatalf("Barrier returned before the server went away: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	j.srv.Shutdown()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrLost) {
			t.Errorf("Barrier = %v, want an error wrapping ErrLost", err)
		}
		if !errors.Is(err, mpierr.ErrProcAborted) {
			t.Errorf("Barrier = %v, want class ErrProcAborted", err)
		}
	case <-time.After(liveness):
		t.Fatal("Barrier still blocked after the server shut down")
	}
	// Both clients, the one in the barrier and the idle one, are told once.
	for _, r := range []int{0, 1} {
		deadline := time.Now().Add(liveness)
		for j.lost[r].count() == 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond) // room for a second, wrong call
		if n := j.lost[r].count(); n != 1 {
			t.Errorf("rank %d: OnLost called %d times, want 1", r, n)
		}
	}
	if _, _, err := c1.Get("x"); !errors.Is(err, ErrLost) {
		t.Errorf("Get after loss = %v, want ErrLost", err)
	}
	if err := c1.Put("x", "y"); !errors.Is(err, ErrLost) {
		t.Errorf("Put after loss = %v, want ErrLost", err)
	}
	// A server that shut down refuses new ranks.
	_, sc := socketPair(t)
	if err := j.srv.Serve(2, sc); !errors.Is(err, ErrLost) {
		t.Errorf("Serve after Shutdown = %v, want ErrLost", err)
	}
}

func TestUnknownCommand(t *testing.T) {
	j := newJob(t, 1, ServerConfig{})
	cc, sc := socketPair(t)
	go j.srv.Serve(0, sc)
	defer cc.Close()
	r := bufio.NewReader(cc)
	for _, tc := range []struct{ send, want string }{
		{"cmd=publish_name service=s port=p\n", "cmd=publish_name_result rc=-1 msg=unknown_command\n"},
		{"cmd=get_universe_size\n", "cmd=universe_size size=1\n"},
		{"cmd=put kvsname=wrong key=k value=v\n", "cmd=put_result rc=-1 msg=unknown_kvsname\n"},
		{"cmd=put kvsname=" + testKVS + " key= value=v\n", "cmd=put_result rc=-1 msg=invalid_key\n"},
		{"cmd=init pmi_version=2 pmi_subversion=0\n", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=-1\n"},
	} {
		if _, err := io.WriteString(cc, tc.send); err != nil {
			t.Fatal(err)
		}
		cc.SetReadDeadline(time.Now().Add(liveness))
		got, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", tc.send, err)
		}
		if got != tc.want {
			t.Errorf("sent %q, got %q, want %q", tc.send, got, tc.want)
		}
	}
}

// TestServerProtocolError: a malformed line ends the rank's conversation and
// is reported through Events.Error.
func TestServerProtocolError(t *testing.T) {
	j := newJob(t, 1, ServerConfig{})
	cc, sc := socketPair(t)
	j.served[0] = make(chan error, 1)
	go func() { j.served[0] <- j.srv.Serve(0, sc) }()
	defer cc.Close()
	io.WriteString(cc, "cmd=put =bad\n")
	if err := j.waitServed(0); !errors.Is(err, mpierr.ErrIntern) {
		t.Errorf("Serve = %v, want an ErrIntern", err)
	}
	j.rec.mu.Lock()
	defer j.rec.mu.Unlock()
	if len(j.rec.errs) != 1 {
		t.Errorf("Error events = %v, want one", j.rec.errs)
	}
}

// TestShutdownIsNotAProtocolError: Events.Error is documented as "a rank
// breaks the protocol"; the server's own Shutdown closing a rank's
// connection is not that.
func TestShutdownIsNotAProtocolError(t *testing.T) {
	j := newJob(t, 2, ServerConfig{})
	j.connect(0)
	j.srv.Shutdown()
	j.waitServed(0)
	j.rec.mu.Lock()
	defer j.rec.mu.Unlock()
	if len(j.rec.errs) != 0 {
		t.Errorf("Error events after Shutdown: %v", j.rec.errs)
	}
}

// scriptedHydra answers the client's lines with the server lines of the
// transcript, in order, and records what the client wrote.
type scriptedHydra struct {
	written bytes.Buffer // what the client sent, exactly
	err     error
}

// serve replays pairs of (client line, Hydra response) from the transcript.
// It reads one line per pair and answers with Hydra's line; a mismatch is
// recorded but the reply is still sent.
func (h *scriptedHydra) serve(conn net.Conn, pairs [][2]string) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for _, p := range pairs {
		line, err := r.ReadString('\n')
		h.written.WriteString(line)
		if err != nil {
			h.err = fmt.Errorf("reading the line for %q: %v", p[0], err)
			return
		}
		if _, err := io.WriteString(conn, p[1]+"\n"); err != nil {
			h.err = err
			return
		}
	}
	// Anything after the script is a protocol error; wait for the client
	// to close.
	rest, _ := io.ReadAll(r)
	h.written.Write(rest)
}

// hydraPairs returns the transcript as (request, response) pairs, without
// the ones the client has no call for.
func hydraPairs(t *testing.T, skip ...string) [][2]string {
	lines := readTranscript(t)
	var pairs [][2]string
	for i := 0; i < len(lines); i += 2 {
		if !lines[i].fromClient || i+1 >= len(lines) || lines[i+1].fromClient {
			t.Fatalf("transcript line %d is not a request followed by its response", i)
		}
		cmd, _ := ParseLine(lines[i].text)
		skipped := false
		for _, s := range skip {
			skipped = skipped || cmd.Name == s
		}
		if !skipped {
			pairs = append(pairs, [2]string{lines[i].text, lines[i+1].text})
		}
	}
	return pairs
}

// TestClientAgainstHydra runs the client against Hydra's recorded responses
// and checks that it writes Hydra's recorded requests.
func TestClientAgainstHydra(t *testing.T) {
	// The client has no call for get_universe_size.
	pairs := hydraPairs(t, "get_universe_size")
	cc, sc := socketPair(t)
	h := &scriptedHydra{}
	hydraDone := make(chan struct{})
	go func() { h.serve(sc, pairs); close(hydraDone) }()

	lost := &lostCounter{}
	c, err := NewClient(cc, 0, 2, ClientOptions{OnLost: lost.onLost})
	if err != nil {
		t.Fatalf("init against Hydra: %v", err)
	}
	if c.KVSName != hydraKVS || c.MaxKey != 64 || c.MaxValue != 1024 || c.Appnum != 0 {
		t.Errorf("after init: kvsname %q maxkey %d maxvalue %d appnum %d", c.KVSName, c.MaxKey, c.MaxValue, c.Appnum)
	}
	if err := c.Put("card-0", "addr-of-0"); err != nil {
		t.Errorf("Put: %v", err)
	}
	if err := c.Barrier(); err != nil {
		t.Errorf("Barrier: %v", err)
	}
	if v, found, err := c.Get("card-1"); err != nil || !found || v != "addr-of-1" {
		t.Errorf("Get(card-1) = %q, %v, %v", v, found, err)
	}
	if v, found, err := c.Get("nosuchkey"); err != nil || found {
		t.Errorf("Get(nosuchkey) = %q, %v, %v; want a miss without error", v, found, err)
	}
	if err := c.Finalize(); err != nil {
		t.Errorf("Finalize: %v", err)
	}
	select {
	case <-hydraDone:
	case <-time.After(liveness):
		t.Fatal("the scripted server did not finish")
	}
	if h.err != nil {
		t.Fatal(h.err)
	}
	var want strings.Builder
	for _, p := range pairs {
		want.WriteString(p[0] + "\n")
	}
	if got := h.written.String(); got != want.String() {
		t.Errorf("client wrote\n%s\nwant (Hydra transcript)\n%s", got, want.String())
	}
	if c.BytesWritten() != int64(want.Len()) {
		t.Errorf("BytesWritten = %d, want %d", c.BytesWritten(), want.Len())
	}
	time.Sleep(50 * time.Millisecond)
	if lost.count() != 0 {
		t.Error("OnLost called after Finalize")
	}
}

// TestClientHydraPutFailure: Hydra's answer to a reserved key is an rc!=0
// put_result, which Put turns into an error.
func TestClientHydraPutFailure(t *testing.T) {
	pairs := hydraPairs(t, "get_universe_size", "put", "barrier_in", "get", "finalize")
	pairs = append(pairs, [2]string{
		"cmd=put kvsname=" + hydraKVS + " key=PMI_x value=1",
		"cmd=put_result rc=-1 msg=key_PMI_x_is_reserved",
	})
	cc, sc := socketPair(t)
	h := &scriptedHydra{}
	go h.serve(sc, pairs)
	c, err := NewClient(cc, 0, 2, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Put("PMI_x", "1"); err == nil || !strings.Contains(err.Error(), "key_PMI_x_is_reserved") {
		t.Errorf("Put = %v, want Hydra's message", err)
	}
}

// TestClientBadResponses: responses of the wrong name or with unreadable
// numbers fail the handshake with ErrIntern.
func TestClientBadResponses(t *testing.T) {
	for _, tc := range []struct{ name, maxes string }{
		{"wrong response", "cmd=appnum appnum=0"},
		{"no vallen_max", "cmd=maxes kvsname_max=256 keylen_max=64"},
		{"vallen_max not a number", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1k"},
		{"vallen_max with sign", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=+1024"},
	} {
		pairs := [][2]string{
			{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0"},
			{"cmd=get_maxes", tc.maxes},
		}
		cc, sc := socketPair(t)
		h := &scriptedHydra{}
		go h.serve(sc, pairs)
		c, err := NewClient(cc, 0, 1, ClientOptions{})
		if err == nil {
			c.Close()
			t.Errorf("%s: handshake succeeded", tc.name)
			continue
		}
		if !errors.Is(err, mpierr.ErrIntern) {
			t.Errorf("%s: %v, want ErrIntern", tc.name, err)
		}
	}
}

// TestDialFD connects the way a rank under Hydra does: PMI_FD, PMI_RANK and
// PMI_SIZE in the environment.
func TestDialFD(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fds[1]), "server")
	sc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pairs := hydraPairs(t, "get_universe_size", "put", "barrier_in", "get")
	h := &scriptedHydra{}
	go h.serve(sc, pairs)
	c, err := Dial(map[string]string{"PMI_FD": strconv.Itoa(fds[0]), "PMI_RANK": "1", "PMI_SIZE": "2"}, ClientOptions{})
	if err != nil {
		syscall.Close(fds[0])
		t.Fatalf("Dial: %v", err)
	}
	if c.Rank != 1 || c.Size != 2 || c.KVSName != hydraKVS {
		t.Errorf("rank %d size %d kvsname %q", c.Rank, c.Size, c.KVSName)
	}
	if err := c.Finalize(); err != nil {
		t.Errorf("Finalize: %v", err)
	}

	for _, env := range []map[string]string{
		{"PMI_FD": "x"},
		{"PMI_FD": "-1"},
		{"PMI_FD": "0", "PMI_RANK": "2", "PMI_SIZE": "2"},
		{"PMI_FD": "0", "PMI_SIZE": "zero"},
	} {
		if c, err := Dial(env, ClientOptions{}); err == nil {
			c.Close()
			t.Errorf("Dial(%v) succeeded", env)
		} else if !errors.Is(err, mpierr.ErrIntern) {
			t.Errorf("Dial(%v) = %v, want ErrIntern", env, err)
		}
	}
	if _, err := Dial(map[string]string{"PATH": "/bin"}, ClientOptions{}); err != ErrNoPMI {
		t.Errorf("Dial without PMI variables = %v, want ErrNoPMI", err)
	}
}

// TestDialPort connects the PMI_PORT way, with the initack handshake.
func TestDialPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no TCP loopback: %v", err)
	}
	defer ln.Close()
	pairs := hydraPairs(t, "get_universe_size", "put", "barrier_in", "get")
	got := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		first, _ := r.ReadString('\n')
		got <- first
		io.WriteString(conn, "cmd=initack rc=0\ncmd=set size=4\ncmd=set rank=3\ncmd=set debug=0\n")
		for _, p := range pairs {
			if _, err := r.ReadString('\n'); err != nil {
				return
			}
			io.WriteString(conn, p[1]+"\n")
		}
	}()
	c, err := Dial(map[string]string{"PMI_PORT": ln.Addr().String(), "PMI_ID": "3"}, ClientOptions{})
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	if first := <-got; first != "cmd=initack pmiid=3\n" {
		t.Errorf("first line %q, want cmd=initack pmiid=3", first)
	}
	if c.Rank != 3 || c.Size != 4 || c.KVSName != hydraKVS {
		t.Errorf("rank %d size %d kvsname %q; want 3, 4, %q", c.Rank, c.Size, c.KVSName, hydraKVS)
	}
	if err := c.Finalize(); err != nil {
		t.Errorf("Finalize: %v", err)
	}
}

func FuzzParseLine(f *testing.F) {
	for _, l := range readTranscript(f) {
		f.Add(l.text)
	}
	for _, s := range []string{
		`cmd=abort exitcode=3 message=a\ b\\c\nd`,
		"mcmd=spawn",
		"cmd=x k=a=b bare",
		"cmd=x\r",
		"cmd=put =x",
		`cmd=x k=\`,
		"",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		c, err := ParseLine(line)
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("ParseLine(%q) error %v lacks ErrIntern", line, err)
			}
			return
		}
		if c.Name == "" {
			t.Fatalf("ParseLine(%q) gave an empty name", line)
		}
		for _, a := range c.Args {
			if a.Key == "" {
				t.Fatalf("ParseLine(%q) gave an empty key", line)
			}
		}
		if lossy(c) {
			return
		}
		enc := c.Encode()
		if bytes.IndexByte(enc, '\n') != len(enc)-1 {
			t.Fatalf("Encode(%#v) = %q: newline inside the line", c, enc)
		}
		c2, err := ParseLine(string(enc[:len(enc)-1]))
		if err != nil {
			t.Fatalf("ParseLine(%q) ok, but its encoding %q fails: %v", line, enc, err)
		}
		if c.Name != c2.Name || len(c.Args) != len(c2.Args) || (len(c.Args) > 0 && !reflect.DeepEqual(c.Args, c2.Args)) {
			t.Fatalf("ParseLine(%q) = %#v; Encode %q parses as %#v", line, c, enc, c2)
		}
	})
}

// FuzzServer feeds arbitrary bytes as the input of the only rank of a job:
// the server must neither panic nor hang.
func FuzzServer(f *testing.F) {
	var all strings.Builder
	for _, l := range readTranscript(f) {
		if l.fromClient {
			line := strings.ReplaceAll(l.text, hydraKVS, testKVS)
			f.Add([]byte(line + "\n"))
			all.WriteString(line + "\n")
		}
	}
	f.Add([]byte(all.String()))
	f.Add([]byte("cmd=barrier_in\ncmd=barrier_in\ncmd=get key=x\n"))
	f.Add([]byte("cmd=abort exitcode=2 message=bye\\ now\n"))
	f.Add([]byte("cmd=peer_lost rank=0\ncmd=peer_lost rank=x\ncmd=abort exitcode=1 lost=0,1\n"))
	f.Add([]byte("cmd=put kvsname=" + testKVS + " key=PMI_x value=1\ncmd=put kvsname=" + testKVS + " key=k value=1\ncmd=put kvsname=" + testKVS + " key=k value=2\n"))
	f.Add([]byte("no newline at the end"))
	f.Add([]byte("cmd=x\r\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		srv := NewServer(ServerConfig{
			KVSName: testKVS, Size: 1, MaxValue: 64,
			Preput: map[string]string{"PMI_process_mapping": "(vector,(0,1,1))"},
			Events: Events{
				Init: func(int) {}, Put: func(int, string, string, int) {}, Finalize: func(int) {},
				Abort: func(int, int, string) {}, Error: func(int, error) {}, PeerLost: func(int, int) {},
			},
		})
		cc, sc := socketPair(t)
		defer cc.Close()
		served := make(chan error, 1)
		go func() { served <- srv.Serve(0, sc) }()
		drained := make(chan struct{})
		go func() { io.Copy(io.Discard, cc); close(drained) }()
		cc.Write(data) // the server may stop reading early; that is fine
		cc.CloseWrite()
		select {
		case <-served:
		case <-time.After(liveness):
			srv.Shutdown()
			t.Fatalf("Serve did not return within %v for input %q", liveness, data)
		}
		select {
		case <-drained:
		case <-time.After(liveness):
			t.Fatalf("the server kept the connection open after Serve returned, input %q", data)
		}
	})
}

// A rank the owner reports dead (Failed): the living ranks are told, with
// a notice their clients hand to OnProcFailed and never mistake for an
// answer; a barrier the living have all entered lets them out.
func TestFailedRank(t *testing.T) {
	j := newJob(t, 3, ServerConfig{})
	told := make(chan int, 4)
	cs := make([]*Client, 2)
	for r := 0; r < 2; r++ {
		cc, sc := socketPair(t)
		go j.srv.Serve(r, sc)
		c, err := NewClient(cc, r, 3, ClientOptions{OnProcFailed: func(dead int) { told <- dead }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs[r] = c
	}
	done := make(chan error, 2)
	for _, c := range cs {
		go func() { done <- c.Barrier() }()
	}
	select {
	case err := <-done:
		t.Fatalf("a barrier 2 of 3 entered released: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	j.srv.Failed(2)
	j.srv.Failed(2) // once only
	for i := 0; i < 2; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(liveness):
			t.Fatal("the living ranks stayed in the barrier after the third died")
		}
		select {
		case r := <-told:
			if r != 2 {
				t.Errorf("told of rank %d, want 2", r)
			}
		case <-time.After(liveness):
			t.Fatal("a living rank was not told")
		}
	}
	// Requests still work: the notice did not take an answer's place.
	if err := cs[0].Put("k", "v"); err != nil {
		t.Fatal(err)
	}
	if v, found, err := cs[1].Get("k"); err != nil || !found || v != "v" {
		t.Fatalf("get after the notice: %q, %v", v, err)
	}
	select {
	case r := <-told:
		t.Errorf("told twice (rank %d)", r)
	default:
	}
}

func FuzzParseProcFailed(f *testing.F) {
	for _, s := range []string{"cmd=proc_failed rank=3", "cmd=proc_failed rank=-1", "cmd=proc_failed", "cmd=proc_failed rank=x", "cmd=other rank=1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		rank, ok := ParseProcFailed(line)
		if ok && rank < 0 {
			t.Fatalf("ParseProcFailed(%q) = %d, true", line, rank)
		}
	})
}

// TestPeerLost: a peer_lost notice goes out while a request waits for its
// answer and gets none; an abort's lost= list is told before the abort; a
// bad list does not stop the abort.
func TestPeerLost(t *testing.T) {
	j := newJob(t, 3, ServerConfig{})
	c := j.connect(0)
	errc := make(chan error, 1)
	go func() { errc <- c.Barrier() }() // ranks 1 and 2 never come
	time.Sleep(20 * time.Millisecond)
	if err := c.PeerLost(2); err != nil {
		t.Fatal(err)
	}
	if err := c.Abort(1, "bye", 1, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-j.rec.abortCh:
		j.rec.mu.Lock()
		got := fmt.Sprint(j.rec.lost)
		j.rec.mu.Unlock()
		if got != "[[0 2] [0 1] [0 2]]" || e != (abortEvent{0, 1, "bye"}) {
			t.Errorf("lost %s and abort %+v, want [[0 2] [0 1] [0 2]] before the abort", got, e)
		}
	case <-time.After(liveness):
		t.Fatal("no Abort event")
	}
	if err := <-errc; !errors.Is(err, ErrLost) {
		t.Errorf("the barrier ended with %v, want ErrLost", err)
	}

	for _, line := range []string{"cmd=abort exitcode=3 lost=1,x\n", "cmd=abort exitcode=3 lost=0,9\n", "cmd=peer_lost rank=7\ncmd=abort exitcode=3\n"} {
		j := newJob(t, 3, ServerConfig{})
		cc, sc := socketPair(t)
		go j.srv.Serve(0, sc)
		if _, err := cc.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		select {
		case e := <-j.rec.abortCh:
			j.rec.mu.Lock()
			if e.code != 3 || len(j.rec.lost) != 0 || len(j.rec.errs) != 0 {
				t.Errorf("%q: abort %+v, lost %v, errors %v; want the abort alone", line, e, j.rec.lost, j.rec.errs)
			}
			j.rec.mu.Unlock()
		case <-time.After(liveness):
			t.Fatalf("%q: no Abort event", line)
		}
		cc.Close()
	}
}

func FuzzParseRankList(f *testing.F) {
	for _, s := range []string{"", "0", "0,1,2", "3,1", "1,1", "-1", "01", "1,,2", "4", "x", strings.Repeat("1,", 2000)} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, size int) {
		ranks, err := ParseRankList(s, size)
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("ParseRankList(%q) error %v lacks ErrIntern", s, err)
			}
			return
		}
		if len(ranks) > MaxRankList {
			t.Fatalf("ParseRankList(%q) gave %d ranks", s, len(ranks))
		}
		seen := map[int]bool{}
		for _, r := range ranks {
			if r < 0 || r >= size || seen[r] {
				t.Fatalf("ParseRankList(%q, %d) gave %v", s, size, ranks)
			}
			seen[r] = true
		}
		if back := FormatRankList(ranks); back != s {
			t.Fatalf("ParseRankList(%q) = %v, which formats as %q", s, ranks, back)
		}
	})
}

// openFiles counts this process's descriptors.
func openFiles(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	return len(ents)
}

// TestListenerStrangers: a listening server refuses what is not an initack
// of a free rank, and closes 1000 silent connections within its handshake
// timeout, never holding more than its bound, while four PMI_PORT clients
// that connect behind them run a job (put, barrier, get) with the right
// result; afterwards the process has the descriptors it had before.
func TestListenerStrangers(t *testing.T) {
	const (
		size    = 4
		silent  = 1000
		maxPend = 256 // the default
		timeout = time.Second
	)
	before := openFiles(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no TCP loopback: %v", err)
	}
	srv := NewServer(ServerConfig{KVSName: testKVS, Size: size})
	served := make(chan error, 1)
	go func() { served <- srv.ServeListener(ln, ListenConfig{HandshakeTimeout: timeout, MaxPending: maxPend}) }()
	addr := ln.Addr().String()

	// Strangers that speak: each is refused at once.
	for _, hello := range []string{"GET / HTTP/1.0\r\n\r\n", "cmd=init pmi_version=1\n", "cmd=initack pmiid=9\n",
		"cmd=initack pmiid=x\n", "cmd=initack\n", strings.Repeat("x", 4096) + "\n"} {
		expectRefused(t, addr, hello)
	}

	flood, err := strangers.Start(silent, liveness, func(int) (net.Conn, error) { return net.Dial("tcp", addr) })
	if err != nil {
		t.Fatal(err)
	}

	// The job, behind the flood.
	var wg sync.WaitGroup
	errs := make(chan error, size)
	for r := 0; r < size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- func() error {
				c, err := Dial(map[string]string{"PMI_PORT": addr, "PMI_ID": strconv.Itoa(r)}, ClientOptions{})
				if err != nil {
					return err
				}
				if c.Rank != r || c.Size != size {
					return fmt.Errorf("rank %d of %d, want %d of %d", c.Rank, c.Size, r, size)
				}
				if err := c.Put(fmt.Sprintf("k%d", r), fmt.Sprintf("v%d", r*r)); err != nil {
					return err
				}
				if err := c.Barrier(); err != nil {
					return err
				}
				for p := 0; p < size; p++ {
					if v, found, err := c.Get(fmt.Sprintf("k%d", p)); err != nil || !found || v != fmt.Sprintf("v%d", p*p) {
						return fmt.Errorf("rank %d got k%d = %q, %v, %v", r, p, v, found, err)
					}
				}
				return c.Finalize()
			}()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("job: %v", err)
		}
	}

	longest, err := flood.Wait()
	if err != nil {
		t.Fatal(err)
	}
	// Accepted after waiting in the kernel's queue, each was closed within
	// the timeout of its accept: a second of slack covers the queue.
	if longest > timeout+time.Second {
		t.Errorf("a silent connection stayed open %v (handshake timeout %v)", longest, timeout)
	}
	pending, peak, evicted, rejected := srv.ListenStats()
	t.Logf("longest-lived silent connection %v; %d pending, at most %d at once, %d closed to make room, %d refused", longest, pending, peak, evicted, rejected)
	if peak > maxPend+1 {
		t.Errorf("%d connections waited at once, more than %d", peak, maxPend)
	}
	if rejected != silent+6 {
		t.Errorf("%d connections refused, want %d", rejected, silent+6)
	}
	srv.Shutdown()
	if err := <-served; err != nil {
		t.Errorf("ServeListener: %v", err)
	}
	deadline := time.Now().Add(liveness)
	for openFiles(t) > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open, %d before", openFiles(t), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func FuzzParseInitack(f *testing.F) {
	for _, s := range []string{"cmd=initack pmiid=3", "cmd=initack pmiid=03", "cmd=initack pmiid=-1", "cmd=initack", "cmd=init pmiid=1", "cmd=initack pmiid=9", "", "GET / HTTP/1.0"} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, line string, size int) {
		rank, _, err := ParseInitack(line, size)
		if err != nil {
			if !errors.Is(err, mpierr.ErrIntern) {
				t.Fatalf("ParseInitack(%q) error %v lacks ErrIntern", line, err)
			}
			return
		}
		if rank < 0 || rank >= size {
			t.Fatalf("ParseInitack(%q, %d) = %d", line, size, rank)
		}
	})
}

// TestListenerAuth: with a secret set, an initack without it, or with
// another, is refused — even for a rank nobody holds yet — and the rank
// remains free for the client that has it; that client runs its job.
func TestListenerAuth(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no TCP loopback: %v", err)
	}
	srv := NewServer(ServerConfig{KVSName: testKVS, Size: 1, Auth: "s3cret"})
	go srv.ServeListener(ln, ListenConfig{HandshakeTimeout: time.Second})
	defer srv.Shutdown()
	addr := ln.Addr().String()
	for _, hello := range []string{"cmd=initack pmiid=0\n", "cmd=initack pmiid=0 auth=guess\n"} {
		expectRefused(t, addr, hello)
	}
	if _, _, _, rejected := srv.ListenStats(); rejected != 2 {
		t.Errorf("%d refused, want 2", rejected)
	}
	c, err := Dial(map[string]string{"PMI_PORT": addr, "PMI_ID": "0", AuthEnv: "s3cret"}, ClientOptions{})
	if err != nil {
		t.Fatalf("the client with the secret: %v", err)
	}
	if err := c.Put("k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := c.Get("k"); err != nil || !ok || v != "v" {
		t.Errorf("get: %q %v %v", v, ok, err)
	}
	if err := c.Finalize(); err != nil {
		t.Fatal(err)
	}
}

// expectRefused says hello to a listening server and expects the
// connection closed without a byte in answer.
func expectRefused(t *testing.T, addr, hello string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte(hello))
	conn.SetReadDeadline(time.Now().Add(liveness))
	if n, err := conn.Read(make([]byte, 64)); n > 0 || err == nil || os.IsTimeout(err) {
		t.Errorf("%.20q: read %d bytes, %v; want the connection closed", hello, n, err)
	}
}

// TestClientSlurmPMI1: Slurm's pmi2 plugin also serves PMI-1 (GOMPI_PMI=1
// under srun --mpi=pmi2), with rc first and a bare rc=1 for a missing key
// (as a real srun answered, test/slurm/run.sh runs it); a failure that
// says why stays an error.
func TestClientSlurmPMI1(t *testing.T) {
	pairs := [][2]string{
		{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1"},
		{"cmd=get_maxes", "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024"},
		{"cmd=get_appnum", "cmd=appnum rc=0 appnum=-1"},
		{"cmd=get_my_kvsname", "cmd=my_kvsname rc=0 kvsname=6.0"},
		{"cmd=get kvsname=6.0 key=PMI_process_mapping", "cmd=get_result rc=0 value=(vector,(0,1,2))"},
		{"cmd=get kvsname=6.0 key=gompi-cookie", "cmd=get_result rc=1"},
		{"cmd=get kvsname=6.0 key=x", "cmd=get_result rc=-1 msg=unknown_kvsname"},
	}
	cc, sc := socketPair(t)
	h := &scriptedHydra{}
	go h.serve(sc, pairs)
	c, err := NewClient(cc, 0, 2, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.KVSName != "6.0" || c.Appnum != -1 || c.MaxValue != 1024 {
		t.Errorf("kvsname %q appnum %d maxvalue %d", c.KVSName, c.Appnum, c.MaxValue)
	}
	if v, found, err := c.Get("PMI_process_mapping"); err != nil || !found || v != "(vector,(0,1,2))" {
		t.Errorf("Get(PMI_process_mapping) = %q, %v, %v", v, found, err)
	}
	if v, found, err := c.Get("gompi-cookie"); err != nil || found {
		t.Errorf("Get of a missing key = %q, %v, %v; want a miss without error", v, found, err)
	}
	if _, _, err := c.Get("x"); err == nil || !strings.Contains(err.Error(), "unknown_kvsname") {
		t.Errorf("Get with a failure that says why = %v, want an error", err)
	}
}
