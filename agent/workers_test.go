package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoWorker answers every line "NONCE REST" with "NONCE echo:REST", and first prints the line
// to stderr; `exit N`, `garbage`, `hang` and `whoami` as REST do what they say.
const echoWorker = `while IFS= read -r l; do
  n=${l%% *}; r=${l#* }
  echo "stderr of $n" >&2
  case "$r" in
    exit\ *) exit "${r#exit }" ;;
    garbage) echo "not an answer" ;;
    hang) setsid sleep 4171 & sleep 4172 ;;
    whoami) echo "$n $(id -u)" ;;
    *) echo "$n echo:$r" ;;
  esac
done`

type workerAnswer struct {
	Line       string `json:"line"`
	Stderr     string `json:"stderr"`
	DurationUs int64  `json:"duration_us"`
	Error      string `json:"error"`
	Reason     string `json:"reason"`
	ExitCode   *int   `json:"exit_code"`
}

func putWorker(t *testing.T, c *http.Client, key string, s spec) (int, workerView, string) {
	t.Helper()
	body, _ := json.Marshal(s)
	request, _ := http.NewRequest(http.MethodPut, "http://agent/v1/workers/"+key, bytes.NewReader(body))
	res, err := c.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var raw json.RawMessage
	json.NewDecoder(res.Body).Decode(&raw)
	var view workerView
	json.Unmarshal(raw, &view)
	return res.StatusCode, view, string(raw)
}

func ensureWorker(t *testing.T, c *http.Client, key string, s spec) workerView {
	t.Helper()
	status, view, raw := putWorker(t, c, key, s)
	if status != 200 {
		t.Fatalf("PUT %s: %d %s", key, status, raw)
	}
	return view
}

func callWorker(t *testing.T, c *http.Client, key, nonce string, line []byte, timeoutMs int) (int, workerAnswer) {
	t.Helper()
	target := fmt.Sprintf("http://agent/v1/workers/%s/call?nonce=%s&timeout_ms=%d", key, url.QueryEscape(nonce), timeoutMs)
	res, err := c.Post(target, "application/octet-stream", bytes.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var answer workerAnswer
	json.NewDecoder(res.Body).Decode(&answer)
	return res.StatusCode, answer
}

func deleteWorker(t *testing.T, c *http.Client, key string) int {
	t.Helper()
	request, _ := http.NewRequest(http.MethodDelete, "http://agent/v1/workers/"+key, nil)
	res, err := c.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func listWorkers(t *testing.T, c *http.Client) []workerView {
	t.Helper()
	res, err := c.Get("http://agent/v1/workers")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var views []workerView
	json.NewDecoder(res.Body).Decode(&views)
	return views
}

// running says whether a process runs (a zombie counts as ended).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// countProcesses counts the processes whose command line is exactly args.
func countProcesses(args string) int {
	entries, _ := os.ReadDir("/proc")
	count := 0
	for _, entry := range entries {
		cmdline, err := os.ReadFile("/proc/" + entry.Name() + "/cmdline")
		if err == nil && strings.Join(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), " ") == args {
			count++
		}
	}
	return count
}

// eventually fails the test unless check holds within 5 s.
func eventually(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func shWorker(script string) spec { return spec{Argv: []string{"sh", "-c", script}} }

func TestWorkerRoundTripEnsureAndStop(t *testing.T) {
	c := startAgent(t)
	first := ensureWorker(t, c, "echo-1", shWorker(echoWorker))
	if first.Started == nil || !*first.Started || first.Pid == 0 || first.Key != "echo-1" || first.Argv[0] != "sh" {
		t.Fatalf("first ensure: %+v", first)
	}
	again := ensureWorker(t, c, "echo-1", shWorker(echoWorker))
	if again.Started == nil || *again.Started || again.Pid != first.Pid || !again.StartedAt.Equal(first.StartedAt) {
		t.Fatalf("the same request started another worker: %+v", again)
	}
	for i := 0; i < 3; i++ {
		nonce := fmt.Sprintf("n%d", i)
		status, answer := callWorker(t, c, "echo-1", nonce, []byte(nonce+" hello <&> "+nonce), 5000)
		if status != 200 || answer.Line != nonce+" echo:hello <&> "+nonce || answer.Stderr != "stderr of "+nonce+"\n" {
			t.Fatalf("call %d: %d %+v", i, status, answer)
		}
	}
	if views := listWorkers(t, c); len(views) != 1 || views[0].Key != "echo-1" || views[0].Pid != first.Pid || views[0].Started != nil {
		t.Fatalf("list: %+v", views)
	}
	if status := deleteWorker(t, c, "echo-1"); status != 200 {
		t.Fatalf("delete: %d", status)
	}
	if running(first.Pid) {
		t.Fatal("the worker outlived its DELETE")
	}
	if status := deleteWorker(t, c, "echo-1"); status != 404 {
		t.Fatalf("second delete: %d", status)
	}
	if status, answer := callWorker(t, c, "echo-1", "n", []byte("n x"), 1000); status != 404 || !strings.Contains(answer.Error, "not running") {
		t.Fatalf("call after delete: %d %+v", status, answer)
	}
	if views := listWorkers(t, c); len(views) != 0 {
		t.Fatalf("list after delete: %+v", views)
	}
}

func TestWorkerAnotherRequestReplacesIt(t *testing.T) {
	c := startAgent(t)
	first := ensureWorker(t, c, "w", shWorker(echoWorker))
	changed := shWorker(echoWorker)
	changed.Env = []string{"A=1"}
	second := ensureWorker(t, c, "w", changed)
	if second.Started == nil || !*second.Started || second.Pid == first.Pid {
		t.Fatalf("a different request kept the worker: %+v", second)
	}
	eventually(t, "the replaced worker still runs", func() bool { return !running(first.Pid) })
	if status, answer := callWorker(t, c, "w", "a", []byte("a b"), 5000); status != 200 || answer.Line != "a echo:b" {
		t.Fatalf("call: %d %+v", status, answer)
	}
	deleteWorker(t, c, "w")
}

func TestWorkerGarbageKillsTheWholeTree(t *testing.T) {
	c := startAgent(t)
	started := ensureWorker(t, c, "g", shWorker("setsid sleep 4173 & "+echoWorker))
	eventually(t, "the grandchild did not start", func() bool { return countProcesses("sleep 4173") == 1 })
	status, answer := callWorker(t, c, "g", "n1", []byte("n1 garbage"), 5000)
	if status != 502 || answer.Reason != "garbage" || answer.Line != "not an answer" || answer.Stderr != "stderr of n1\n" {
		t.Fatalf("garbage: %d %+v", status, answer)
	}
	if running(started.Pid) {
		t.Fatal("the worker survived its garbage")
	}
	eventually(t, "the grandchild survived", func() bool { return countProcesses("sleep 4173") == 0 })
	if status, _ := callWorker(t, c, "g", "n2", []byte("n2 x"), 5000); status != 404 {
		t.Fatalf("a call after garbage: %d", status)
	}
	long := strings.Repeat("x", 500)
	ensureWorker(t, c, "g", shWorker("read l; echo "+long))
	if _, answer := callWorker(t, c, "g", "n", []byte("n"), 5000); answer.Reason != "garbage" || answer.Line != long[:garbageBytes] {
		t.Fatalf("a long garbage line is quoted whole: %+v", answer)
	}
}

func TestWorkerExitDuringACall(t *testing.T) {
	c := startAgent(t)
	ensureWorker(t, c, "x", shWorker(echoWorker))
	status, answer := callWorker(t, c, "x", "n1", []byte("n1 exit 3"), 5000)
	if status != 502 || answer.Reason != "exited" || answer.ExitCode == nil || *answer.ExitCode != 3 || answer.Stderr != "stderr of n1\n" {
		t.Fatalf("exit: %d %+v", status, answer)
	}
	if status, _ := callWorker(t, c, "x", "n2", []byte("n2 x"), 5000); status != 404 {
		t.Fatalf("a call after the exit: %d", status)
	}
	// A worker that ends before its first call: its start-up stderr comes with the failure.
	ensureWorker(t, c, "x", shWorker("echo cannot start >&2; exit 9"))
	eventually(t, "the worker that exited is still listed", func() bool { return len(listWorkers(t, c)) == 0 })
	if status, _ := callWorker(t, c, "x", "n", []byte("n"), 5000); status != 404 {
		t.Fatalf("a worker that died between calls is absent: %d", status)
	}
	ensureWorker(t, c, "x", shWorker("echo cannot start >&2; sleep 0.3; exit 9"))
	if status, answer := callWorker(t, c, "x", "n", []byte("n"), 5000); status != 502 || *answer.ExitCode != 9 || answer.Stderr != "cannot start\n" {
		t.Fatalf("start-up failure: %d %+v", status, answer)
	}
	// An answer printed just before the worker exits is still the answer.
	ensureWorker(t, c, "x", shWorker(`read l; echo "${l%% *} last"; exit 0`))
	if status, answer := callWorker(t, c, "x", "n", []byte("n"), 5000); status != 200 || answer.Line != "n last" {
		t.Fatalf("answer then exit: %d %+v", status, answer)
	}
}

func TestWorkerTimeoutKillsTheWholeTree(t *testing.T) {
	c := startAgent(t)
	started := ensureWorker(t, c, "slow", shWorker(echoWorker))
	began := time.Now()
	status, answer := callWorker(t, c, "slow", "n1", []byte("n1 hang"), 300)
	if status != 504 || answer.Reason != "timeout" || answer.Stderr != "stderr of n1\n" {
		t.Fatalf("timeout: %d %+v", status, answer)
	}
	if elapsed := time.Since(began); elapsed > 3*time.Second {
		t.Fatalf("the timeout took %v", elapsed)
	}
	if running(started.Pid) {
		t.Fatal("the worker survived its timeout")
	}
	eventually(t, "the worker's children survived its timeout", func() bool {
		return countProcesses("sleep 4171") == 0 && countProcesses("sleep 4172") == 0
	})
	if status, _ := callWorker(t, c, "slow", "n2", []byte("n2 x"), 1000); status != 404 {
		t.Fatalf("a call after the timeout: %d", status)
	}
	// A worker that never reads its stdin times out too, however long the line.
	ensureWorker(t, c, "deaf", shWorker("sleep 4174"))
	if status, _ := callWorker(t, c, "deaf", "n", bytes.Repeat([]byte("n"), 1<<20), 300); status != 504 {
		t.Fatalf("a worker that does not read: %d", status)
	}
	eventually(t, "the deaf worker survived", func() bool { return countProcesses("sleep 4174") == 0 })
}

func TestWorkerCallsAreSerialized(t *testing.T) {
	c := startAgent(t)
	// The worker takes a moment per line: a second line written meanwhile would be read as the
	// next call's answer (garbage) or take the other call's answer.
	ensureWorker(t, c, "serial", shWorker(`while IFS= read -r l; do sleep 0.02; echo "$l"; done`))
	var wg sync.WaitGroup
	failures := make(chan string, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			nonce := fmt.Sprintf("call-%d", i)
			if status, answer := callWorker(t, c, "serial", nonce, []byte(nonce+" body"), 10000); status != 200 || answer.Line != nonce+" body" {
				failures <- fmt.Sprintf("%s: %d %+v", nonce, status, answer)
			}
		}(i)
	}
	wg.Wait()
	close(failures)
	for failure := range failures {
		t.Error(failure)
	}
	deleteWorker(t, c, "serial")
}

func TestWorkerBigLinesAndTheirLimit(t *testing.T) {
	c := startAgent(t)
	// cat answers with the line itself, which begins with the nonce.
	ensureWorker(t, c, "cat", spec{Argv: []string{"cat"}})
	line := append([]byte("big "), bytes.Repeat([]byte("y"), maxWorkerLine-4)...)
	status, answer := callWorker(t, c, "cat", "big", line, 30000)
	if status != 200 || len(answer.Line) != maxWorkerLine || answer.Line[:6] != "big yy" {
		t.Fatalf("a 32 MiB line: %d, %d bytes, %s", status, len(answer.Line), answer.Error)
	}
	over := append(line, 'y')
	if status, answer := callWorker(t, c, "cat", "big", over, 30000); status != 413 || !strings.Contains(answer.Error, "32 MiB") {
		t.Fatalf("a line over 32 MiB: %d %+v", status, answer)
	}
	if status, answer := callWorker(t, c, "cat", "n", []byte("n a\nn b"), 1000); status != 400 || !strings.Contains(answer.Error, "newline") {
		t.Fatalf("two lines: %d %+v", status, answer)
	}
	// The worker was left alone by refused calls.
	if status, answer := callWorker(t, c, "cat", "n", []byte("n ok"), 5000); status != 200 || answer.Line != "n ok" {
		t.Fatalf("after refusals: %d %+v", status, answer)
	}
	ensureWorker(t, c, "huge", shWorker(fmt.Sprintf(`read l; head -c %d /dev/zero | tr '\0' y; echo`, maxWorkerLine+1)))
	if status, answer := callWorker(t, c, "huge", "y", []byte("x"), 30000); status != 502 || answer.Reason != "garbage" || !strings.Contains(answer.Error, "over") {
		t.Fatalf("an answer over 32 MiB: %d %+v", status, answer)
	}
}

func TestWorkerStderrIsDrainedAndKeptPerCall(t *testing.T) {
	c := startAgent(t)
	// 1 MiB of stderr per call: a pipe holds 64 KiB, so an undrained worker would block.
	script := `while IFS= read -r l; do head -c 1048576 /dev/zero | tr '\0' e >&2; printf 'tail-%s' "${l%% *}" >&2; echo "$l"; done`
	ensureWorker(t, c, "chatty", shWorker(script))
	for i := 0; i < 3; i++ {
		nonce := fmt.Sprintf("c%d", i)
		status, answer := callWorker(t, c, "chatty", nonce, []byte(nonce), 10000)
		if status != 200 || len(answer.Stderr) != workerStderrBytes || !strings.HasSuffix(answer.Stderr, "tail-"+nonce) {
			t.Fatalf("call %d: %d, %d bytes of stderr ending %q", i, status, len(answer.Stderr), answer.Stderr[max(0, len(answer.Stderr)-20):])
		}
	}
	deleteWorker(t, c, "chatty")
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func TestWorkerOutlivesExecsAndAClearKillsIt(t *testing.T) {
	c := startAgent(t)
	started := ensureWorker(t, c, "long", shWorker(echoWorker))
	execute(t, c, sh("sleep 4175 & echo left behind"))
	execute(t, c, sh("true"))
	if status, answer := callWorker(t, c, "long", "n", []byte("n still"), 5000); status != 200 || answer.Line != "n echo:still" {
		t.Fatalf("after unrelated execs: %d %+v", status, answer)
	}
	a := &agent{started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()}
	other := serveAgent(t, a)
	second := ensureWorker(t, other, "long", shWorker(echoWorker))
	a.workers.clear(true)
	eventually(t, "a cleared worker still runs", func() bool { return !running(second.Pid) })
	if !running(started.Pid) {
		t.Fatal("another agent's clear killed this agent's worker")
	}
	deleteWorker(t, c, "long")
}

func TestWorkerRunsAsTheRequestedUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	c := startAgent(t)
	s := shWorker(echoWorker)
	s.User = "nobody"
	ensureWorker(t, c, "user", s)
	if status, answer := callWorker(t, c, "user", "n", []byte("n whoami"), 5000); status != 200 || answer.Line != "n 65534" {
		t.Fatalf("whoami: %d %+v", status, answer)
	}
	// A timeout kills a worker of another user too.
	status, _ := callWorker(t, c, "user", "n", []byte("n hang"), 300)
	if status != 504 {
		t.Fatalf("timeout: %d", status)
	}
	eventually(t, "another user's worker tree survived its timeout", func() bool {
		return countProcesses("sleep 4171") == 0 && countProcesses("sleep 4172") == 0
	})
	dropping := serveAgent(t, &agent{dropCaps: true, started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()})
	root := spec{Argv: []string{"sh", "-c", `read l; echo "$l $(grep ^CapEff /proc/self/status | tr -d '\t')"`}, User: "root"}
	ensureWorker(t, dropping, "root", root)
	if status, answer := callWorker(t, dropping, "root", "n", []byte("n"), 5000); status != 200 || answer.Line != "n CapEff:0000000000000000" {
		t.Fatalf("root worker under --drop-caps: %d %+v", status, answer)
	}
}

func TestWorkerRefusesBadRequests(t *testing.T) {
	c := startAgent(t)
	for _, key := range []string{"-leading", "has space", strings.Repeat("k", 129), "ä", "a%b"} {
		if status, _, raw := putWorker(t, c, url.PathEscape(key), shWorker("cat")); status != 400 || !strings.Contains(raw, "worker key") {
			t.Fatalf("key %q: %d %s", key, status, raw)
		}
	}
	if status, _, raw := putWorker(t, c, "k", spec{}); status != 400 || !strings.Contains(raw, "argv") {
		t.Fatalf("no argv: %d %s", status, raw)
	}
	if status, _, raw := putWorker(t, c, "k", spec{Argv: []string{"no-such-program-x"}}); status != 422 || !strings.Contains(raw, `"exit_code":127`) {
		t.Fatalf("missing program: %d %s", status, raw)
	}
	if status, _, raw := putWorker(t, c, "k", spec{Argv: []string{"cat"}, Cwd: "/no/such/dir"}); status != 422 || !strings.Contains(raw, "working directory") {
		t.Fatalf("missing cwd: %d %s", status, raw)
	}
	if os.Getuid() == 0 {
		if status, _, raw := putWorker(t, c, "k", spec{Argv: []string{"cat"}, User: "no-such-user"}); status != 422 || !strings.Contains(raw, "unknown user") {
			t.Fatalf("unknown user: %d %s", status, raw)
		}
	}
	request, _ := http.NewRequest(http.MethodPut, "http://agent/v1/workers/k", strings.NewReader("{not json"))
	if res, _ := c.Do(request); res.StatusCode != 400 {
		t.Fatalf("bad JSON: %d", res.StatusCode)
	}
	ensureWorker(t, c, "k", spec{Argv: []string{"cat"}})
	for _, bad := range []struct{ nonce, timeout string }{{"", "1000"}, {"has space", "1000"}, {strings.Repeat("n", 129), "1000"}, {"n", ""}, {"n", "0"}, {"n", "-5"}, {"n", "x"}, {"n", "86400001"}} {
		target := fmt.Sprintf("http://agent/v1/workers/k/call?nonce=%s&timeout_ms=%s", url.QueryEscape(bad.nonce), bad.timeout)
		res, _ := c.Post(target, "text/plain", strings.NewReader("n x"))
		res.Body.Close()
		if res.StatusCode != 400 {
			t.Fatalf("nonce %q timeout %q: %d", bad.nonce, bad.timeout, res.StatusCode)
		}
	}
	if status, _ := callWorker(t, c, "nobody-here", "n", []byte("n"), 1000); status != 404 {
		t.Fatalf("unknown worker: %d", status)
	}
	for _, attempt := range []struct{ method, path string }{{http.MethodGet, "/v1/workers/k"}, {http.MethodPost, "/v1/workers"}, {http.MethodGet, "/v1/workers/k/call"}} {
		request, _ := http.NewRequest(attempt.method, "http://agent"+attempt.path, nil)
		res, _ := c.Do(request)
		res.Body.Close()
		if res.StatusCode != 405 {
			t.Fatalf("%s %s: %d", attempt.method, attempt.path, res.StatusCode)
		}
	}
	request, _ = http.NewRequest(http.MethodGet, "http://agent/v1/workers/k/other", nil)
	if res, _ := c.Do(request); res.StatusCode != 404 {
		t.Fatalf("unknown route: %d", res.StatusCode)
	}
	if status, answer := callWorker(t, c, "k", "n", []byte("n fine"), 5000); status != 200 || answer.Line != "n fine" {
		t.Fatalf("the worker after refusals: %d %+v", status, answer)
	}
	deleteWorker(t, c, "k")
}

func TestWorkerLimit(t *testing.T) {
	a := &agent{started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()}
	c := serveAgent(t, a)
	t.Cleanup(func() { a.workers.clear(true) })
	for i := 0; i < maxWorkers; i++ {
		ensureWorker(t, c, fmt.Sprintf("w%d", i), spec{Argv: []string{"cat"}})
	}
	status, _, raw := putWorker(t, c, "one-more", spec{Argv: []string{"cat"}})
	if status != 429 || !strings.Contains(raw, "64 workers") {
		t.Fatalf("past the limit: %d %s", status, raw)
	}
	// The same request for a running key is no new worker, and a stopped one makes room.
	ensureWorker(t, c, "w0", spec{Argv: []string{"cat"}})
	deleteWorker(t, c, "w1")
	ensureWorker(t, c, "one-more", spec{Argv: []string{"cat"}})
	if n := len(listWorkers(t, c)); n != maxWorkers {
		t.Fatalf("%d workers listed", n)
	}
}

func TestWorkerClientGoneKillsIt(t *testing.T) {
	c := startAgent(t)
	started := ensureWorker(t, c, "gone", shWorker(echoWorker))
	client := &http.Client{Transport: c.Transport, Timeout: 200 * time.Millisecond}
	_, err := client.Post("http://agent/v1/workers/gone/call?nonce=n&timeout_ms=60000", "text/plain", strings.NewReader("n hang"))
	if err == nil {
		t.Fatal("the call answered")
	}
	eventually(t, "a call whose client went away left its worker running", func() bool {
		return !running(started.Pid) && countProcesses("sleep 4172") == 0
	})
}

// An idle worker costs the agent no CPU: its stderr drain waits for the pipe rather than
// polling it (a drain that returned on an empty pipe spun at several percent of a core).
func TestIdleWorkerCostsNoCPU(t *testing.T) {
	c := startAgent(t)
	ensureWorker(t, c, "idle-1", shWorker(echoWorker))
	ensureWorker(t, c, "idle-2", shWorker(echoWorker))
	if status, _ := callWorker(t, c, "idle-1", "n", []byte("n x"), 5000); status != 200 {
		t.Fatalf("call: %d", status)
	}
	cpu := func() time.Duration {
		var usage syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
			t.Fatal(err)
		}
		return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
	}
	before := cpu()
	time.Sleep(time.Second)
	if used := cpu() - before; used > 150*time.Millisecond {
		t.Fatalf("two idle workers cost the agent %v of CPU in one second", used)
	}
}
