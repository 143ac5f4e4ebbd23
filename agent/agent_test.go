package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets the test binary serve the agent's internal commands (`file`, `drop-caps`,
// `kill-tagged`), which the agent runs as /proc/self/exe, and run threadScenario.
func TestMain(m *testing.M) {
	runInternalCommand(os.Args)
	if mode := os.Getenv(threadScenarioVar); mode != "" {
		os.Exit(threadScenario(mode))
	}
	// Orphans come to the test process, as they come to the agent as PID 1 (tree.go).
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	go children.run()
	if os.Getenv(forkStressVar) != "" {
		os.Exit(forkStress())
	}
	os.Exit(m.Run())
}

const prSetChildSubreaper = 36

// client talks HTTP to an agent serving on a fresh Unix socket.
func startAgent(t *testing.T) *http.Client {
	t.Helper()
	return serveAgent(t, &agent{started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()})
}

func serveAgent(t *testing.T, a *agent) *http.Client {
	t.Helper()
	socket := filepath.Join(t.TempDir(), "agent.sock")
	listener, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	server := &http.Server{Handler: a.routes()}
	go server.Serve(listener)
	t.Cleanup(func() { server.Close() })
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
	}}
}

type frame struct {
	kind byte
	data []byte
}

type runResult struct {
	frames []frame
	exit   exitStatus
	stdout string
	stderr string
	output string
}

func execute(t *testing.T, c *http.Client, req execRequest) runResult {
	t.Helper()
	body, _ := json.Marshal(req)
	res, err := c.Post("http://agent/v1/exec", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out runResult
	for {
		var header [5]byte
		if _, err := io.ReadFull(res.Body, header[:]); err != nil {
			break
		}
		payload := make([]byte, binary.BigEndian.Uint32(header[1:]))
		io.ReadFull(res.Body, payload)
		out.frames = append(out.frames, frame{header[0], payload})
		switch header[0] {
		case frameStdout:
			out.stdout += string(payload)
			out.output += string(payload)
		case frameStderr:
			out.stderr += string(payload)
			out.output += string(payload)
		case frameExit:
			json.Unmarshal(payload, &out.exit)
		case frameError:
			t.Fatalf("error frame: %s", payload)
		}
	}
	return out
}

func sh(script string) execRequest {
	return execRequest{spec: spec{Argv: []string{"sh", "-c", script}}}
}

func TestExecOutputOrderAndExitCode(t *testing.T) {
	c := startAgent(t)
	r := execute(t, c, sh("echo 1; sleep 0.02; echo 2 >&2; sleep 0.02; echo 3; exit 7"))
	if r.output != "1\n2\n3\n" || r.stdout != "1\n3\n" || r.stderr != "2\n" || r.exit.ExitCode != 7 {
		t.Fatalf("got %+v", r)
	}
	if last := r.frames[len(r.frames)-1]; last.kind != frameExit {
		t.Fatalf("last frame is %d, want exit", last.kind)
	}
}

func TestExecStdinEnvCwd(t *testing.T) {
	c := startAgent(t)
	req := sh("cat; echo \"$A\"; pwd")
	req.Stdin = []byte("in\n")
	req.Env = []string{"A=from-env"}
	req.Cwd = "/tmp"
	if r := execute(t, c, req); r.stdout != "in\nfrom-env\n/tmp\n" {
		t.Fatalf("got %q", r.stdout)
	}
}

func TestExecMissingCommandsAreShellStyle(t *testing.T) {
	c := startAgent(t)
	if r := execute(t, c, execRequest{spec: spec{Argv: []string{"no-such-command-x"}}}); r.exit.ExitCode != 127 || !strings.Contains(r.stderr, "command not found") {
		t.Fatalf("got %+v", r)
	}
	if r := execute(t, c, execRequest{spec: spec{Argv: []string{"/etc/passwd"}}}); r.exit.ExitCode != 126 {
		t.Fatalf("got %+v", r)
	}
}

func TestExecNamesAMissingWorkingDirectory(t *testing.T) {
	c := startAgent(t)
	for _, dir := range []string{"/no/such/dir", "/etc/passwd"} {
		req := execRequest{spec: spec{Argv: []string{"pwd"}, Cwd: dir}}
		if r := execute(t, c, req); r.exit.ExitCode != 126 || !strings.Contains(r.stderr, "working directory "+dir) {
			t.Fatalf("got %+v", r)
		}
	}
}

func TestExecTimeoutKillsTheWholeTree(t *testing.T) {
	c := startAgent(t)
	req := sh("echo before; setsid sleep 31 & sleep 31; echo never")
	req.TimeoutMs = 300
	started := time.Now()
	r := execute(t, c, req)
	if r.exit.ExitCode != 124 || !r.exit.TimedOut || r.stdout != "before\n" {
		t.Fatalf("got %+v", r)
	}
	if elapsed := time.Since(started); elapsed > 3*time.Second {
		t.Fatalf("took %v", elapsed)
	}
	if left := execute(t, c, sh("ps -eo args= | grep -c '^sleep 31$' || true")).stdout; left != "0\n" {
		t.Fatalf("%s sleeps left", left)
	}
}

func TestExecReturnsWhenTheCommandExitsDespiteBackgroundChildren(t *testing.T) {
	c := startAgent(t)
	started := time.Now()
	r := execute(t, c, sh("sleep 3 & echo started"))
	if r.stdout != "started\n" || time.Since(started) > 2*time.Second {
		t.Fatalf("got %q after %v", r.stdout, time.Since(started))
	}
	execute(t, c, sh("pkill -f '^sleep 3$' || true"))
}

func TestExecClientDisconnectKillsTheCommand(t *testing.T) {
	c := startAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	body, _ := json.Marshal(sh("sleep 32"))
	request, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://agent/v1/exec", bytes.NewReader(body))
	started := time.Now()
	res, err := c.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(started); waited > 2*time.Second {
		t.Fatalf("the response started only after %v: headers must not wait for output", waited)
	}
	time.Sleep(200 * time.Millisecond)
	cancel()
	res.Body.Close()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if execute(t, c, sh("ps -eo args= | grep -c '^sleep 32$' || true")).stdout == "0\n" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the command outlived its client")
}

func TestExecAsAnotherUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	c := startAgent(t)
	req := execRequest{spec: spec{Argv: []string{"id", "-u"}, User: "nobody"}}
	if r := execute(t, c, req); r.stdout != "65534\n" {
		t.Fatalf("got %+v", r)
	}
	req.User = "no-such-user"
	if r := execute(t, c, req); r.exit.ExitCode != 126 || !strings.Contains(r.stderr, "unknown user") {
		t.Fatalf("got %+v", r)
	}
}

func fileRequest(t *testing.T, c *http.Client, method, path string, body []byte) (int, []byte) {
	t.Helper()
	request, _ := http.NewRequest(method, "http://agent/v1/files?path="+path, bytes.NewReader(body))
	res, err := c.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, data
}

// fileModes are the two ways the agent performs file operations: in child processes, and on
// threads with the user's credentials where the kernel gives threads credentials of their own.
func fileModes(t *testing.T) map[string]*agent {
	modes := map[string]*agent{"child": {started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()}}
	if perThreadCredentials() {
		modes["thread"] = &agent{fileThreads: true, started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()}
	} else {
		t.Log("no per-thread credentials here (not root, or gVisor): only the child mode is tested")
	}
	return modes
}

func TestFiles(t *testing.T) {
	for mode, a := range fileModes(t) {
		t.Run(mode, func(t *testing.T) { checkFiles(t, serveAgent(t, a)) })
	}
}

func checkFiles(t *testing.T, c *http.Client) {
	dir := t.TempDir()
	content := make([]byte, 3<<20)
	for i := range content {
		content[i] = byte(i * 7)
	}
	path := filepath.Join(dir, "a", "b", "blob.bin")
	if status, body := fileRequest(t, c, http.MethodPut, path, content); status != 200 {
		t.Fatalf("write: %d %s", status, body)
	}
	if status, body := fileRequest(t, c, http.MethodGet, path, nil); status != 200 || !bytes.Equal(body, content) {
		t.Fatalf("read: %d, %d bytes", status, len(body))
	}
	if status, body := fileRequest(t, c, http.MethodPut, path, []byte("short")); status != 200 {
		t.Fatalf("rewrite: %d %s", status, body)
	}
	if status, body := fileRequest(t, c, http.MethodGet, path, nil); status != 200 || string(body) != "short" {
		t.Fatalf("rewrite did not truncate: %d %q", status, body)
	}
	if status, body := fileRequest(t, c, http.MethodGet, filepath.Join(dir, "missing"), nil); status != 404 || !strings.Contains(string(body), "not found") {
		t.Fatalf("missing: %d %s", status, body)
	}
	if status, _ := fileRequest(t, c, http.MethodGet, dir, nil); status != 400 {
		t.Fatalf("directory: %d", status)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if status, body := fileRequest(t, c, http.MethodGet, fifo, nil); status != 400 || !strings.Contains(string(body), "'"+fifo+"' is a FIFO") {
		t.Fatalf("fifo: %d %s", status, body)
	}
	if status, body := fileRequest(t, c, http.MethodGet, "/dev/zero", nil); status != 400 || !strings.Contains(string(body), "a character device") {
		t.Fatalf("device: %d %s", status, body)
	}
	if status, _ := fileRequest(t, c, http.MethodPut, dir, []byte("x")); status != 400 {
		t.Fatalf("write to a directory: %d", status)
	}
	if status, _ := fileRequest(t, c, http.MethodPut, filepath.Join(path, "under-a-file"), []byte("x")); status != 400 {
		t.Fatalf("parent is a file: %d", status)
	}
	if status, _ := fileRequest(t, c, http.MethodGet, "relative/path", nil); status != 400 {
		t.Fatalf("relative: %d", status)
	}
	if status, _ := fileRequest(t, c, http.MethodGet, dir+"/a/../a/b/blob.bin", nil); status != 400 {
		t.Fatalf("unnormalised: %d", status)
	}
	if status, _ := fileRequest(t, c, http.MethodDelete, filepath.Join(dir, "a"), nil); status != 200 {
		t.Fatalf("delete: %d", status)
	}
	if status, _ := fileRequest(t, c, http.MethodDelete, filepath.Join(dir, "a"), nil); status != 404 {
		t.Fatalf("delete again: %d", status)
	}
	if status, _ := fileRequest(t, c, http.MethodPost, filepath.Join(dir, "made")+"&op=mkdir", nil); status != 200 {
		t.Fatalf("mkdir: %d", status)
	}
	if info, err := os.Stat(filepath.Join(dir, "made")); err != nil || !info.IsDir() {
		t.Fatalf("mkdir made nothing: %v", err)
	}
}

func TestFilesRespectTheUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	for mode, a := range fileModes(t) {
		t.Run(mode, func(t *testing.T) {
			c := serveAgent(t, a)
			as := func(user, method, path string, body string) (int, string) {
				request, _ := http.NewRequest(method, "http://agent/v1/files?user="+user+"&path="+path, strings.NewReader(body))
				res, err := c.Do(request)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				data, _ := io.ReadAll(res.Body)
				return res.StatusCode, string(data)
			}
			// t.TempDir's parent is closed to others; these live in a directory anyone may enter.
			root, err := os.MkdirTemp("", "agent-files-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(root) })
			os.Chmod(root, 0o755)
			closed, open := filepath.Join(root, "closed"), filepath.Join(root, "open")
			os.Mkdir(closed, 0o755) // root's: nobody may enter, not write
			os.Mkdir(open, 0o777)
			os.Chmod(open, 0o777)
			if status, _ := as("nobody", http.MethodPut, filepath.Join(closed, "x"), "x"); status != http.StatusForbidden {
				t.Fatalf("nobody wrote into a root directory: %d", status)
			}
			secret := filepath.Join(closed, "secret")
			os.WriteFile(secret, []byte("root only"), 0o600)
			if status, body := as("nobody", http.MethodGet, secret, ""); status != http.StatusForbidden || !strings.Contains(body, "permission denied") {
				t.Fatalf("nobody read a root-only file: %d %s", status, body)
			}
			if status, _ := as("nobody", http.MethodDelete, secret, ""); status != http.StatusForbidden {
				t.Fatalf("nobody deleted a root file: %d", status)
			}
			made := filepath.Join(open, "sub", "made-by-nobody")
			if status, body := as("nobody", http.MethodPut, made, "hello"); status != 200 {
				t.Fatalf("nobody could not write into an open directory: %d %s", status, body)
			}
			for _, path := range []string{made, filepath.Dir(made)} {
				var st syscall.Stat_t
				if err := syscall.Stat(path, &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
					t.Fatalf("%s belongs to %d:%d, not nobody (%v)", path, st.Uid, st.Gid, err)
				}
			}
			// Nothing of nobody's credentials stays behind: root still reads what only root may.
			if status, body := as("root", http.MethodGet, secret, ""); status != 200 || body != "root only" {
				t.Fatalf("root after nobody: %d %q", status, body)
			}
			if status, body := as("no-such-user", http.MethodGet, secret, ""); status != 400 || !strings.Contains(body, "unknown user") {
				t.Fatalf("unknown user: %d %s", status, body)
			}
		})
	}
	if _, err := os.ReadFile("/proc/self/status"); err != nil || os.Getuid() != 0 {
		t.Fatal("the test process lost its credentials")
	}
}

func TestDetached(t *testing.T) {
	c := startAgent(t)
	body, _ := json.Marshal(spec{Argv: []string{"sh", "-c", "echo out; echo err >&2; sleep 33"}})
	res, err := c.Post("http://agent/v1/detached", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var started detachedProcess
	json.NewDecoder(res.Body).Decode(&started)
	res.Body.Close()
	if started.Status != "running" || started.Pid == 0 {
		t.Fatalf("got %+v", started)
	}
	get := func(path string) (int, []byte) {
		res, err := c.Get("http://agent/v1/detached/" + started.ID + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		data, _ := io.ReadAll(res.Body)
		return res.StatusCode, data
	}
	time.Sleep(200 * time.Millisecond)
	if _, logs := get("/logs?stream=stdout"); string(logs) != "out\n" {
		t.Fatalf("stdout %q", logs)
	}
	if _, logs := get("/logs?stream=stderr"); string(logs) != "err\n" {
		t.Fatalf("stderr %q", logs)
	}
	if status, _ := get("/logs?stream=both"); status != 400 {
		t.Fatalf("bad stream: %d", status)
	}
	request, _ := http.NewRequest(http.MethodDelete, "http://agent/v1/detached/"+started.ID, nil)
	killed, _ := c.Do(request)
	var answered detachedProcess
	json.NewDecoder(killed.Body).Decode(&answered)
	killed.Body.Close()
	if answered.Status != "killed" || answered.FinishedAt == nil {
		t.Fatalf("the kill answered %+v", answered)
	}
	var after detachedProcess
	_, data := get("")
	json.Unmarshal(data, &after)
	if after.Status != "killed" || after.ExitCode == nil || *after.ExitCode != 137 {
		t.Fatalf("after kill: %+v", after)
	}
	if status, _ := get("/../99"); status != 404 {
		t.Fatalf("unknown id: %d", status)
	}
	res, _ = c.Get("http://agent/v1/detached")
	var list []detachedProcess
	json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if len(list) != 1 || list[0].ID != started.ID {
		t.Fatalf("list: %+v", list)
	}
}

func TestDropCapsLeavesRootCommandsWithoutCapabilities(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: only root holds capabilities to drop")
	}
	capabilities := func(c *http.Client) string {
		return execute(t, c, execRequest{spec: spec{Argv: []string{"grep", "^Cap[EP]", "/proc/self/status"}, User: "root"}}).stdout
	}
	dropping := serveAgent(t, &agent{dropCaps: true, started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()})
	if got := capabilities(dropping); got != "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n" {
		t.Fatalf("with --drop-caps a root command kept capabilities:\n%s", got)
	}
	if got := capabilities(startAgent(t)); strings.Contains(got, "CapEff:\t0000000000000000") {
		t.Fatalf("without --drop-caps root lost its capabilities:\n%s", got)
	}
	if got := execute(t, dropping, execRequest{spec: spec{Argv: []string{"no-such-command"}, User: "root"}}); got.exit.ExitCode != 127 {
		t.Fatalf("missing command under drop-caps: exit %d", got.exit.ExitCode)
	}
}

func TestOOMKillsReadsTheMemoryCgroup(t *testing.T) {
	dir := t.TempDir()
	saved := [2]string{memoryEventsFile, oomControlFile}
	t.Cleanup(func() { memoryEventsFile, oomControlFile = saved[0], saved[1] })
	memoryEventsFile, oomControlFile = filepath.Join(dir, "memory.events"), filepath.Join(dir, "memory.oom_control")
	if _, known := oomKills(); known {
		t.Fatal("no cgroup file, yet a count")
	}
	os.WriteFile(oomControlFile, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"), 0o644)
	if n, known := oomKills(); !known || n != 2 {
		t.Fatalf("cgroup v1: %d %v", n, known)
	}
	os.WriteFile(memoryEventsFile, []byte("low 0\nhigh 0\nmax 4\noom 3\noom_kill 3\n"), 0o644)
	if n, known := oomKills(); !known || n != 3 {
		t.Fatalf("cgroup v2: %d %v", n, known)
	}
}
