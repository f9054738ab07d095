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
	"strings"
	"testing"
	"time"

	"github.com/gompi/gompi/mpierr"
)

// slurmExchange is one request and its answer from
// testdata/slurm-pmi2-transcript.txt, as raw bytes on the wire.
type slurmExchange struct {
	req, resp string
}

// readSlurmTranscript returns the exchanges of the recorded conversation
// with Slurm 22.05's mpi/pmi2 plugin. The transcript shows the newline of the
// two PMI-1 init lines as \n; frames have none.
func readSlurmTranscript(t testing.TB) []slurmExchange {
	t.Helper()
	data, err := os.ReadFile("testdata/slurm-pmi2-transcript.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out []slurmExchange
	var req string
	for _, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if strings.HasPrefix(l, "#") || l == "" {
			continue
		}
		dir, raw, ok := strings.Cut(l, " ")
		if !ok || (dir != ">" && dir != "<") {
			t.Fatalf("transcript line %q has no direction", l)
		}
		raw = strings.ReplaceAll(raw, `\n`, "\n")
		if dir == ">" {
			if req != "" {
				t.Fatalf("request %q has no response", req)
			}
			req = raw
			continue
		}
		if req == "" {
			t.Fatalf("response %q answers no request", raw)
		}
		out = append(out, slurmExchange{req, raw})
		req = ""
	}
	if len(out) < 10 || req != "" {
		t.Fatalf("transcript: %d exchanges, unanswered %q", len(out), req)
	}
	return out
}

// TestSlurmTranscriptFrames parses every frame of the transcript: the length
// field says the body's length, the body parses, and the rank's requests
// re-encode to the same bytes.
func TestSlurmTranscriptFrames(t *testing.T) {
	ex := readSlurmTranscript(t)
	if ex[0].req != "cmd=init pmi_version=2 pmi_subversion=0\n" || ex[0].resp != "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n" {
		t.Fatalf("first exchange %q", ex[0])
	}
	for _, e := range ex[1:] {
		for i, raw := range []string{e.req, e.resp} {
			body, err := ReadFrame(strings.NewReader(raw))
			if err != nil {
				t.Fatalf("ReadFrame(%q): %v", raw, err)
			}
			if body != raw[FrameHeader:] {
				t.Fatalf("ReadFrame(%q) = %q", raw, body)
			}
			c, err := ParseFrame(body)
			if err != nil {
				t.Fatalf("ParseFrame(%q): %v", body, err)
			}
			if i == 1 {
				if !strings.HasSuffix(c.Name, "-response") {
					t.Errorf("response %q is named %q", body, c.Name)
				}
				if rc, _ := c.Get("rc"); rc != "0" {
					t.Errorf("response %q: rc %q", body, rc)
				}
				continue
			}
			enc, err := c.Frame()
			if err != nil || string(enc) != raw {
				t.Errorf("Frame(%q) = %q, %v; want the transcript's bytes", body, enc, err)
			}
		}
	}
	c, _ := ParseFrame("cmd=kvs-put;key=bc-0;value=addr=host:5000 rank=0;")
	if v, _ := c.Get("value"); v != "addr=host:5000 rank=0" {
		t.Errorf("a value with '=' and a blank: %q", v)
	}
}

func TestFrameRefuses(t *testing.T) {
	for _, c := range []Command{
		Cmd("kvs-put", "key", "k", "value", "a;b"),
		Cmd("kvs-put", "key", "k;x", "value", "v"),
		Cmd("kvs-put", "k=x", "v"),
		Cmd("kvs-put", "", "v"),
		Cmd("kvs-put", "key", "k", "value", "nul\x00"),
		Cmd("kvs;put"),
		Cmd(""),
		Cmd("kvs-put", "key", "k", "value", strings.Repeat("v", MaxFrame)),
	} {
		if b, err := c.Frame(); err == nil || !errors.Is(err, mpierr.ErrArg) {
			t.Errorf("Frame(%#v) = %q, %v; want an ErrArg error", c, b, err)
		}
	}
	// Blanks, '=' and newlines travel as they are.
	c := Cmd("kvs-put", "key", "k", "value", " a=b\nc ")
	b, err := c.Frame()
	if err != nil || string(b) != "    32cmd=kvs-put;key=k;value= a=b\nc ;" {
		t.Errorf("Frame = %q, %v", b, err)
	}
}

func TestReadFrameMalformed(t *testing.T) {
	for _, raw := range []string{
		"0     ", "      ", "-1    ", "+1    cmd=x;", "1 2   ", "abcdef", "65537 " + strings.Repeat("x", 65537),
		" 0x10 ", "1\x00    ",
	} {
		_, err := ReadFrame(strings.NewReader(raw))
		if err == nil || !errors.Is(err, mpierr.ErrIntern) {
			t.Errorf("ReadFrame(%q) = %v, want an ErrIntern error", raw, err)
		}
	}
	for raw, want := range map[string]error{
		"":                     io.EOF,
		"12":                   io.ErrUnexpectedEOF,
		"14    cmd=":           io.ErrUnexpectedEOF,
		"14    ":               io.ErrUnexpectedEOF,
		"000014cmd=job-getid;": nil,
		"14    cmd=job-getid;": nil,
	} {
		if _, err := ReadFrame(strings.NewReader(raw)); err != want {
			t.Errorf("ReadFrame(%q) = %v, want %v", raw, err, want)
		}
	}
	for _, body := range []string{"", ";", "key=v;", "cmd=;", "cmd=x;novalue;", "cmd=x;=v;", "cmd=x;;", "cmdx;", "cmd=a=b;"} {
		if c, err := ParseFrame(body); err == nil || !errors.Is(err, mpierr.ErrIntern) {
			t.Errorf("ParseFrame(%q) = %#v, %v; want an ErrIntern error", body, c, err)
		}
	}
	// A missing last ';' is tolerated.
	if c, err := ParseFrame("cmd=x;k=v"); err != nil || !reflect.DeepEqual(c, Cmd("x", "k", "v")) {
		t.Errorf("ParseFrame without the last ';' = %#v, %v", c, err)
	}
}

// scriptedSlurm replays the transcript: for each exchange it reads exactly
// the bytes of the recorded request, records them, and answers with the
// recorded response. After the last one it closes, as the stepd does after
// finalize.
type scriptedSlurm struct {
	written bytes.Buffer
	err     error
}

func (s *scriptedSlurm) serve(conn net.Conn, ex []slurmExchange) {
	defer conn.Close()
	for _, e := range ex {
		got := make([]byte, len(e.req))
		if _, err := io.ReadFull(conn, got); err != nil {
			s.written.Write(got)
			s.err = fmt.Errorf("reading %q: %v", e.req, err)
			return
		}
		s.written.Write(got)
		if string(got) != e.req {
			s.err = fmt.Errorf("client wrote %q, want %q", got, e.req)
			return
		}
		if _, err := io.WriteString(conn, e.resp); err != nil {
			s.err = err
			return
		}
	}
}

// slurmScript returns the transcript's exchanges that gompi's client makes,
// in order: without the node attributes (no call for them) and without the
// probe's kvs-get forms that carry jobid and srcid (the client sends the
// short form, also recorded).
func slurmScript(t *testing.T) []slurmExchange {
	var out []slurmExchange
	for _, e := range readSlurmTranscript(t) {
		if strings.Contains(e.req, "cmd=info-putnodeattr;") || strings.Contains(e.req, "cmd=info-getnodeattr;") ||
			strings.Contains(e.req, "cmd=kvs-get;jobid=") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// TestClient2AgainstSlurm runs the client against Slurm's recorded answers
// and checks that it writes exactly the recorded requests.
func TestClient2AgainstSlurm(t *testing.T) {
	script := slurmScript(t)
	cc, sc := socketPair(t)
	s := &scriptedSlurm{}
	done := make(chan struct{})
	go func() { s.serve(sc, script); close(done) }()

	lost := &lostCounter{}
	c, err := NewClient2(cc, 0, 2, "8.0", ClientOptions{OnLost: lost.onLost})
	if err != nil {
		t.Fatalf("init against Slurm: %v (server: %v)", err, s.err)
	}
	if c.Version != 2 || c.Rank != 0 || c.Size != 2 || c.Appnum != -1 || c.KVSName != "8.0" || c.MaxKey != 64 || c.MaxValue != 1024 {
		t.Errorf("after init: version %d rank %d size %d appnum %d kvsname %q maxkey %d maxvalue %d",
			c.Version, c.Rank, c.Size, c.Appnum, c.KVSName, c.MaxKey, c.MaxValue)
	}
	get := func(key, want string, wantFound bool) {
		t.Helper()
		v, found, err := c.Get(key)
		if err != nil || found != wantFound || v != want {
			t.Errorf("Get(%s) = %q, %v, %v; want %q, %v", key, v, found, err, want, wantFound)
		}
	}
	get("PMI_process_mapping", "(vector,(0,1,2))", true)
	get("universeSize", "2", true)
	get("mpi_reserved_ports", "", false)
	get("PMI_bogus_attr", "", false)
	if err := c.Put("bc-0", "addr=host:5000 rank=0"); err != nil {
		t.Errorf("Put: %v", err)
	}
	// Slurm shows a pair to nobody before the fence; the client shows its
	// own puts to itself, without asking.
	get("bc-0", "addr=host:5000 rank=0", true)
	if err := c.Barrier(); err != nil {
		t.Errorf("Barrier: %v", err)
	}
	get("no-such-key", "", false)
	if err := c.Put("epoch2-0", "0"); err != nil {
		t.Errorf("Put: %v", err)
	}
	if err := c.Barrier(); err != nil {
		t.Errorf("Barrier: %v", err)
	}
	get("epoch2-1", "10", true)
	get("bc-1", "addr=host:5001 rank=1", true)
	if err := c.Barrier(); err != nil {
		t.Errorf("Barrier: %v", err)
	}
	// gompi's own notices must not reach Slurm: it never answers a command
	// it does not know.
	if err := c.PeerLost(1); err != nil {
		t.Errorf("PeerLost: %v", err)
	}
	if err := c.Finalize(); err != nil {
		t.Errorf("Finalize: %v", err)
	}
	select {
	case <-done:
	case <-time.After(liveness):
		t.Fatal("the scripted server did not finish")
	}
	if s.err != nil {
		t.Fatal(s.err)
	}
	var want strings.Builder
	for _, e := range script {
		want.WriteString(e.req)
	}
	if got := s.written.String(); got != want.String() {
		t.Errorf("client wrote\n%q\nwant (the transcript's requests)\n%q", got, want.String())
	}
	if c.BytesWritten() != int64(want.Len()) {
		t.Errorf("BytesWritten = %d, want %d", c.BytesWritten(), want.Len())
	}
	select {
	case <-c.Lost():
	case <-time.After(liveness):
		t.Fatal("the end of the connection after finalize was not noticed")
	}
	time.Sleep(20 * time.Millisecond)
	if lost.count() != 0 {
		t.Error("OnLost called after Finalize")
	}
}

// slurmFrame is a frame as Slurm writes it: %-6d, then the body.
func slurmFrame(body string) string { return fmt.Sprintf("%-6d%s", len(body), body) }

// answer writes a frame the way Slurm does.
func answer(conn net.Conn, body string) { io.WriteString(conn, slurmFrame(body)) }

// TestClient2Lost: the server going away between requests is noticed at
// once (OnLost), and later requests fail with ErrLost.
func TestClient2Lost(t *testing.T) {
	cc, sc := socketPair(t)
	go func() {
		r := bufio.NewReader(sc)
		r.ReadString('\n')
		io.WriteString(sc, "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n")
		ReadFrame(r)
		answer(sc, "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=0;size=1;appnum=-1;debugged=FALSE;pmiverbose=FALSE;")
		ReadFrame(r)
		answer(sc, "cmd=job-getid-response;rc=0;jobid=9.0;")
		sc.Close()
	}()
	lost := make(chan error, 1)
	c, err := NewClient2(cc, 0, 1, "9.0", ClientOptions{OnLost: func(err error) { lost <- err }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-lost:
	case <-time.After(liveness):
		t.Fatal("OnLost was not called")
	}
	if _, _, err := c.Get("k"); !errors.Is(err, ErrLost) {
		t.Errorf("Get after the loss: %v, want ErrLost", err)
	}
}

// TestClient2AgainstPMI1Server: gompi's own server (PMI-1 only) refuses the
// PMI-2 init; the error says how to choose PMI-1.
func TestClient2AgainstPMI1Server(t *testing.T) {
	j := newJob(t, 1, ServerConfig{})
	cc, sc := socketPair(t)
	go j.srv.Serve(0, sc)
	c, err := NewClient2(cc, 0, 1, "1.0", ClientOptions{})
	if err == nil {
		c.Close()
		t.Fatal("PMI-2 against a PMI-1 server succeeded")
	}
	if !errors.Is(err, mpierr.ErrIntern) || !strings.Contains(err.Error(), "GOMPI_PMI=1") {
		t.Errorf("error %v: want ErrIntern and a hint at GOMPI_PMI=1", err)
	}
}

// TestClient2BadResponses: answers that break the protocol fail the
// handshake with the right class.
func TestClient2BadResponses(t *testing.T) {
	const init = "cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n"
	for _, tc := range []struct {
		name     string
		initResp string
		frames   []string // raw answers to fullinit, job-getid
		class    error
		text     string
	}{
		{"init refused", "cmd=response_to_init rc=-1 pmi_version=1 pmi_subversion=1\n", nil, mpierr.ErrIntern, "GOMPI_PMI=1"},
		{"fullinit rc", init, []string{slurmFrame("cmd=fullinit-response;rc=3;errmsg=pmijobid missing;rank=0;size=2;appnum=-1;")}, mpierr.ErrOther, "pmijobid missing"},
		{"wrong rank", init, []string{slurmFrame("cmd=fullinit-response;rc=0;pmi-version=2;rank=1;size=2;appnum=-1;")}, mpierr.ErrIntern, "PMI_RANK=0"},
		{"rank out of range", init, []string{slurmFrame("cmd=fullinit-response;rc=0;pmi-version=2;rank=5;size=2;appnum=-1;")}, mpierr.ErrIntern, "rank 5 of 2"},
		{"no rc", init, []string{slurmFrame("cmd=fullinit-response;rank=0;size=2;appnum=0;")}, mpierr.ErrIntern, "has no rc"},
		{"bad length", init, []string{"4x    cmd=fullinit-response;rc=0;"}, mpierr.ErrProcAborted, "frame length"},
		{"wrong response", init, []string{slurmFrame("cmd=kvs-fence-response;rc=0;")}, mpierr.ErrIntern, "expected cmd=fullinit-response"},
		{"no jobid", init, []string{slurmFrame("cmd=fullinit-response;rc=0;pmi-version=2;rank=0;size=2;appnum=-1;"), slurmFrame("cmd=job-getid-response;rc=0;")}, mpierr.ErrIntern, "no jobid"},
	} {
		cc, sc := socketPair(t)
		go func() {
			defer sc.Close()
			r := bufio.NewReader(sc)
			r.ReadString('\n')
			io.WriteString(sc, tc.initResp)
			for _, f := range tc.frames {
				if _, err := ReadFrame(r); err != nil {
					return
				}
				io.WriteString(sc, f)
			}
			io.Copy(io.Discard, r)
		}()
		c, err := NewClient2(cc, 0, 2, "8.0", ClientOptions{})
		if err == nil {
			c.Close()
			t.Errorf("%s: the handshake succeeded", tc.name)
			continue
		}
		if !errors.Is(err, tc.class) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v; want class %v and %q", tc.name, err, tc.class, tc.text)
		}
	}
}

func TestWireVersion(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int
	}{
		{map[string]string{}, 1},
		{map[string]string{"PMI_FD": "3"}, 1},
		{map[string]string{"SLURM_MPI_TYPE": "pmi2", "PMI_JOBID": "3.0", "PMI_FD": "11"}, 2},
		// gompi's mpirun inside a Slurm step: SLURM_MPI_TYPE inherited,
		// PMI_JOBID dropped.
		{map[string]string{"SLURM_MPI_TYPE": "pmi2", "PMI_FD": "3"}, 1},
		{map[string]string{"SLURM_MPI_TYPE": "pmix", "PMI_JOBID": "3.0"}, 1},
		{map[string]string{"SLURM_MPI_TYPE": "pmi2", "PMI_JOBID": "3.0", VersionEnv: "1"}, 1},
		{map[string]string{VersionEnv: "2"}, 2},
		{map[string]string{VersionEnv: ""}, 1},
	} {
		if got, err := WireVersion(tc.env); err != nil || got != tc.want {
			t.Errorf("WireVersion(%v) = %d, %v; want %d", tc.env, got, err, tc.want)
		}
	}
	for _, v := range []string{"3", "pmi2", "v2", " 2", "0"} {
		_, err := WireVersion(map[string]string{VersionEnv: v})
		if err == nil || !errors.Is(err, mpierr.ErrArg) || !strings.Contains(err.Error(), "use 1") {
			t.Errorf("WireVersion(%s=%q) = %v, want an ErrArg error saying what to use", VersionEnv, v, err)
		}
		if _, err := Dial(map[string]string{VersionEnv: v, "PMI_FD": "0"}, ClientOptions{}); !errors.Is(err, mpierr.ErrArg) {
			t.Errorf("Dial with %s=%q: %v, want ErrArg", VersionEnv, v, err)
		}
	}
}

// FuzzReadFrame feeds arbitrary bytes to the frame reader and parser: they
// must return errors, never panic, and what parses must survive Frame and
// parse again to the same command.
func FuzzReadFrame(f *testing.F) {
	for _, e := range readSlurmTranscript(f) {
		f.Add([]byte(e.req + e.resp))
	}
	for _, s := range []string{"0     ", "999999x", "3     a;b", "5     cmd=x", "7     cmd=x;;", "000009cmd=x;k=v"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		for i := 0; i < 100; i++ {
			body, err := ReadFrame(r)
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, mpierr.ErrIntern) {
					t.Fatalf("ReadFrame: %v lacks ErrIntern", err)
				}
				return
			}
			if len(body) > MaxFrame {
				t.Fatalf("a body of %d bytes", len(body))
			}
			c, err := ParseFrame(body)
			if err != nil {
				if !errors.Is(err, mpierr.ErrIntern) {
					t.Fatalf("ParseFrame(%q): %v lacks ErrIntern", body, err)
				}
				continue
			}
			enc, err := c.Frame()
			if err != nil {
				// Only a NUL, which the parser lets through, is refused.
				if !strings.Contains(body, "\x00") {
					t.Fatalf("ParseFrame(%q) = %#v, which Frame refuses: %v", body, c, err)
				}
				continue
			}
			c2, err := ReadFrame(bytes.NewReader(enc))
			if err != nil {
				t.Fatalf("ReadFrame(Frame(%#v)): %v", c, err)
			}
			if c3, err := ParseFrame(c2); err != nil || !reflect.DeepEqual(c, c3) {
				t.Fatalf("ParseFrame(%q) = %#v; Frame %q parses as %#v, %v", body, c, enc, c3, err)
			}
		}
	})
}
