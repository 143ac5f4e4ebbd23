package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestOpenPtyAndResize(t *testing.T) {
	master, slave, err := openPty()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	defer slave.Close()
	if err := setWindowSize(master, ptySize{Cols: 123, Rows: 45}); err != nil {
		t.Fatal(err)
	}
	size, err := windowSize(slave)
	if err != nil || size != (ptySize{Cols: 123, Rows: 45}) {
		t.Fatalf("slave size %+v, %v", size, err)
	}
	slave.Write([]byte("ping\n"))
	buf := make([]byte, 64)
	n, _ := master.Read(buf)
	if !strings.Contains(string(buf[:n]), "ping") {
		t.Fatalf("master read %q", buf[:n])
	}
}

// terminal is a client of POST /v1/pty on a raw connection to the agent's socket.
type terminal struct {
	conn   net.Conn
	reader *bufio.Reader
	output strings.Builder
	exit   *int
}

func openTerminal(t *testing.T, socket string, req ptyRequest) (*terminal, *http.Response) {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	body, _ := json.Marshal(req)
	fmt.Fprintf(conn, "POST /v1/pty HTTP/1.1\r\nHost: agent\r\nUpgrade: %s\r\nConnection: Upgrade\r\nContent-Length: %d\r\n\r\n%s", ptyProtocol, len(body), body)
	reader := bufio.NewReader(conn)
	res, err := http.ReadResponse(reader, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &terminal{conn: conn, reader: reader}, res
}

func (term *terminal) send(kind byte, payload []byte) {
	var header [5]byte
	header[0] = kind
	binary.BigEndian.PutUint32(header[1:], uint32(len(payload)))
	term.conn.Write(append(header[:], payload...))
}

// readUntil reads frames until the output holds want or the exit frame came.
func (term *terminal) readUntil(t *testing.T, want string) {
	t.Helper()
	term.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for !strings.Contains(term.output.String(), want) && term.exit == nil {
		var header [5]byte
		if _, err := io.ReadFull(term.reader, header[:]); err != nil {
			t.Fatalf("reading for %q: %v (output %q)", want, err, term.output.String())
		}
		payload := make([]byte, binary.BigEndian.Uint32(header[1:]))
		io.ReadFull(term.reader, payload)
		switch header[0] {
		case frameStdout:
			term.output.Write(payload)
		case frameExit:
			var status struct {
				ExitCode int `json:"exit_code"`
			}
			json.Unmarshal(payload, &status)
			term.exit = &status.ExitCode
		}
	}
}

// serveAgentSocket serves a fresh agent on a Unix socket and returns its path.
func serveAgentSocket(t *testing.T) string {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "agent.sock")
	listener, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	server := &http.Server{Handler: (&agent{started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()}).routes()}
	go server.Serve(listener)
	t.Cleanup(func() { server.Close() })
	return socket
}

func TestPtySessionEchoResizeExit(t *testing.T) {
	socket := serveAgentSocket(t)

	term, res := openTerminal(t, socket, ptyRequest{spec: spec{Argv: []string{"sh"}, Cwd: "/tmp"}, Cols: 80, Rows: 24})
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", res.StatusCode)
	}
	term.send(frameInput, []byte("echo h''i; pwd; echo $TERM\n"))
	term.readUntil(t, "xterm-256color\r\n")
	if !strings.Contains(term.output.String(), "hi\r\n/tmp\r\n") {
		t.Fatalf("output %q", term.output.String())
	}
	term.send(frameResize, []byte(`{"cols":132,"rows":40}`))
	term.send(frameInput, []byte("stty size\n"))
	term.readUntil(t, "40 132")
	term.send(frameInput, []byte("exit 3\n"))
	term.readUntil(t, "\x00never")
	if term.exit == nil || *term.exit != 3 {
		t.Fatalf("exit %v, output %q", term.exit, term.output.String())
	}

	bad, res := openTerminal(t, socket, ptyRequest{spec: spec{Argv: []string{"sh"}}, Cols: 0, Rows: 24})
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusBadRequest || !bytes.Contains(body, []byte("cols and rows")) {
		t.Fatalf("bad size: %d %s", res.StatusCode, body)
	}
	bad.conn.Close()
	_, res = openTerminal(t, socket, ptyRequest{spec: spec{Argv: []string{"no-such-shell"}}, Cols: 80, Rows: 24})
	if res.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("missing shell: %d", res.StatusCode)
	}
}

func TestPtyClientGoneKillsTheShell(t *testing.T) {
	socket := serveAgentSocket(t)

	marker := fmt.Sprintf("/tmp/pty-test-%d", time.Now().UnixNano())
	term, _ := openTerminal(t, socket, ptyRequest{spec: spec{Argv: []string{"sh"}}, Cols: 80, Rows: 24})
	term.send(frameInput, []byte("sleep 300 & echo $! > "+marker+"; echo sta''rted\n"))
	term.readUntil(t, "started\r\n")
	data, err := os.ReadFile(marker)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(marker)
	pid := strings.TrimSpace(string(data))
	term.conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile("/proc/" + pid + "/stat")
		if err != nil || strings.Contains(string(stat), ") Z ") {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("background job %s of a closed terminal still runs", pid)
}

// TestPtyBelongsToItsUser: a terminal opened for another user is that user's device (the agent
// opens it as the user: root without CAP_CHOWN could not hand it over).
func TestPtyBelongsToItsUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	socket := serveAgentSocket(t)
	term, res := openTerminal(t, socket, ptyRequest{spec: spec{Argv: []string{"sh"}, User: "65534", Cwd: "/tmp"}, Cols: 80, Rows: 24})
	if res.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("status %d", res.StatusCode)
	}
	term.send(frameInput, []byte("echo owner=$(stat -c %u $(tty))\n"))
	term.readUntil(t, "owner=6")
	term.readUntil(t, "\n")
	if !strings.Contains(term.output.String(), "owner=65534") {
		t.Fatalf("output %q", term.output.String())
	}
}
