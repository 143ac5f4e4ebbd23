package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"sync"
	"time"
)

// Workers are long-lived processes that answer one line per call: the agent writes the call's
// line and a newline to a worker's stdin and answers with the first line the worker prints to
// stdout, which must begin with the call's nonce. A call costs a pipe round trip instead of an
// interpreter start. Like a detached command, a worker outlives the request that started it
// (an exec's end does not kill it); its own DELETE, a failed call and a reset do.
const (
	// maxWorkerLine is the longest line either way, its newline excluded.
	maxWorkerLine = 32 << 20
	// maxWorkers is how many workers one agent runs at once.
	maxWorkers = 64
	// workerStderrBytes is the stderr kept per call: the most recent bytes.
	workerStderrBytes = 64 << 10
	// garbageBytes is how much of a line that is not an answer the failure quotes.
	garbageBytes = 200
	// maxWorkerTimeoutMs bounds a call's timeout_ms (one day).
	maxWorkerTimeoutMs = 24 * 60 * 60 * 1000
	// workerOutputGrace is how long the output of a worker that exited is still read (it is
	// normally at EOF at once: the rest of its tree is killed) before its pipes are closed.
	workerOutputGrace = time.Second
	// workerStopWait bounds the wait for a killed worker's exit status.
	workerStopWait = 5 * time.Second
)

var (
	workerKeyPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,127}$`)
	// A nonce is printable ASCII without spaces, so that it never splits an answer line.
	noncePattern = regexp.MustCompile(`^[\x21-\x7e]{1,128}$`)
)

// worker is one long-lived process and the pipes to it.
type worker struct {
	key       string
	spec      spec
	specKey   string // spec as JSON: two requests for the same worker compare equal
	proc      *process
	startedAt time.Time
	stdin     *os.File
	stdout    *os.File
	lines     chan workerLine
	stderr    *stderrDrain
	// calls lets one call at a time talk to the worker.
	calls sync.Mutex
	// exited is closed once the process has exited; exitCode is set before.
	exited   chan struct{}
	exitCode int
	// killed is closed once the worker is being stopped (kill); gone once its pipes are closed.
	killed   chan struct{}
	killOnce sync.Once
	gone     chan struct{}
}

// workerView is a worker as GET /v1/workers and PUT /v1/workers/{key} show it.
type workerView struct {
	Key       string    `json:"key"`
	Pid       int       `json:"pid"`
	Argv      []string  `json:"argv"`
	Started   *bool     `json:"started,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

func (w *worker) view() workerView {
	return workerView{Key: w.key, Pid: w.proc.pid, Argv: w.spec.Argv, StartedAt: w.startedAt}
}

// kill SIGKILLs the worker's whole process tree (once) and closes its stdin, which ends a
// write that is blocked on a worker that does not read.
func (w *worker) kill() { w.stop(true) }

// stop marks the worker stopped (once) and closes its stdin; with killTree it also kills its
// process tree (a reset kills every process itself, and must not leave a helper it forks behind).
func (w *worker) stop(killTree bool) {
	w.killOnce.Do(func() {
		close(w.killed)
		if killTree {
			w.proc.killTree()
			runs.release(w.proc)
		}
		w.stdin.Close()
	})
}

// isClosed says whether a channel that is only ever closed has been.
func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// alive says whether the worker may take calls: it runs and nothing is stopping it.
func (w *worker) alive() bool {
	return !isClosed(w.exited) && !isClosed(w.killed)
}

// exitsSoon says whether the process exits within a moment: a closed pipe is often seen
// before the reaper has the exit status.
func (w *worker) exitsSoon() bool {
	select {
	case <-w.exited:
		return true
	case <-time.After(100 * time.Millisecond):
		return false
	}
}

// waitExit waits (bounded) for the worker's exit status after a kill.
func (w *worker) waitExit() {
	select {
	case <-w.exited:
	case <-time.After(workerStopWait):
	}
}

type workerTable struct {
	mu    sync.Mutex
	items map[string]*worker
}

func newWorkerTable() *workerTable { return &workerTable{items: map[string]*worker{}} }

// errTooManyWorkers: the agent runs maxWorkers already.
var errTooManyWorkers = fmt.Errorf("this sandbox runs %d workers already: stop one first", maxWorkers)

// ensure starts worker key unless one runs with the same spec; a different spec replaces it.
func (t *workerTable) ensure(key string, s spec, defaultUser string, dropCaps bool) (*worker, bool, error) {
	encoded, _ := json.Marshal(s)
	t.mu.Lock()
	defer t.mu.Unlock()
	if existing := t.items[key]; existing != nil {
		if existing.alive() && existing.specKey == string(encoded) {
			return existing, false, nil
		}
		existing.kill()
		delete(t.items, key)
	}
	if len(t.items) >= maxWorkers {
		return nil, false, errTooManyWorkers
	}
	w, err := startWorker(key, s, defaultUser, dropCaps)
	if err != nil {
		return nil, false, err
	}
	w.specKey = string(encoded)
	t.items[key] = w
	go t.supervise(w)
	return w, true, nil
}

// startWorker starts the process with a pipe for each of its streams.
func startWorker(key string, s spec, defaultUser string, dropCaps bool) (*worker, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (*os.File, *os.File, error) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	drain, err := newStderrDrain(errR)
	if err != nil {
		closeAll()
		return nil, err
	}
	proc, err := startProcess(s, defaultUser, dropCaps, inR, outW, errW)
	// The child holds its ends now; the agent keeps only its own.
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, err
	}
	// Live between calls, until it is killed or a reset ends it.
	runs.keep(proc)
	w := &worker{
		key: key, spec: s, proc: proc, startedAt: time.Now().UTC(),
		stdin: inW, stdout: outR, lines: make(chan workerLine), stderr: drain,
		exited: make(chan struct{}), killed: make(chan struct{}), gone: make(chan struct{}),
	}
	return w, nil
}

// supervise runs for the worker's lifetime: it reads its output, and once the process exits
// (by itself or killed) kills the rest of its tree, removes it from the table, lets the
// readers take what it printed, and closes its pipes.
func (t *workerTable) supervise(w *worker) {
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); readLines(w.stdout, w.lines, w.gone) }()
	go func() { defer readers.Done(); w.stderr.run() }()
	w.exitCode = exitCode(<-w.proc.done)
	close(w.exited)
	w.kill()
	t.remove(w)
	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-time.After(workerOutputGrace):
	}
	close(w.gone)
	w.stdout.Close()
	w.stderr.file.Close()
}

// remove takes w out of the table, if it is still the worker of its key.
func (t *workerTable) remove(w *worker) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.items[w.key] == w {
		delete(t.items, w.key)
	}
}

// get is the running worker of key (nil when none runs).
func (t *workerTable) get(key string) *worker {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.items[key]; w != nil && w.alive() {
		return w
	}
	return nil
}

// stop kills worker key and waits for it to end; false when none runs.
func (t *workerTable) stop(key string) bool {
	t.mu.Lock()
	w := t.items[key]
	delete(t.items, key)
	t.mu.Unlock()
	if w == nil {
		return false
	}
	w.kill()
	w.waitExit()
	return true
}

// list is every running worker, by key.
func (t *workerTable) list() []workerView {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := []workerView{}
	for _, w := range t.items {
		if w.alive() {
			out = append(out, w.view())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// clear stops and forgets every worker; killTrees false leaves the killing to the caller (a
// reset, which then kills every process of the sandbox).
func (t *workerTable) clear(killTrees bool) {
	t.mu.Lock()
	items := t.items
	t.items = map[string]*worker{}
	t.mu.Unlock()
	for _, w := range items {
		w.stop(killTrees)
	}
}

// callResult is the outcome of one call: the HTTP status and the JSON body of the answer.
type callResult struct {
	status int
	body   map[string]interface{}
}

// call writes line (its newline included) to the worker and waits for the answer, the
// worker's end, the timeout or cancel. Any outcome but an answer stops the worker.
func (t *workerTable) call(w *worker, nonce string, line []byte, timeout time.Duration, cancel <-chan struct{}) *callResult {
	w.calls.Lock()
	defer w.calls.Unlock()
	if !w.alive() {
		return notRunning(w.key)
	}
	started := time.Now()
	oomBefore, oomKnown := oomKills()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	written := make(chan error, 1)
	go func() {
		_, err := w.stdin.Write(line)
		written <- err
	}()
	lines, exited := (<-chan workerLine)(w.lines), (<-chan struct{})(w.exited)
	var answer []byte
	writing := true
	fail := func(status int, reason, message string, extra map[string]interface{}) *callResult {
		w.kill()
		t.remove(w)
		w.waitExit()
		body := map[string]interface{}{"error": message, "reason": reason, "stderr": w.stderr.take()}
		for k, v := range extra {
			body[k] = v
		}
		return &callResult{status: status, body: body}
	}
	exitedFailure := func(why string) *callResult {
		w.kill()
		w.waitExit()
		extra := map[string]interface{}{"exit_code": w.exitCode}
		// As for an exec (exec.go): SIGKILL while an OOM killer counted a new kill.
		if after, _ := oomKills(); w.exitCode == 137 && oomKnown && after > oomBefore {
			extra["oom_killed"] = true
		}
		return fail(502, "exited", fmt.Sprintf("worker '%s' %s during the call (exit code %d)", w.key, why, w.exitCode), extra)
	}
	for {
		select {
		case err := <-written:
			writing, written = false, nil
			if err != nil {
				// The worker let go of its stdin: it has exited, or is about to.
				if w.exitsSoon() {
					return exitedFailure("exited")
				}
				return exitedFailure("closed its stdin")
			}
		case item, open := <-lines:
			switch {
			case !open:
				if w.exitsSoon() {
					return exitedFailure("exited")
				}
				return exitedFailure("closed its stdout")
			case item.tooLong:
				return fail(502, "garbage", fmt.Sprintf("worker '%s' printed a line over %d bytes", w.key, maxWorkerLine), map[string]interface{}{"line": ""})
			case len(item.data) < len(nonce) || string(item.data[:len(nonce)]) != nonce:
				quoted := item.data
				if len(quoted) > garbageBytes {
					quoted = quoted[:garbageBytes]
				}
				return fail(502, "garbage", fmt.Sprintf("worker '%s' printed a line that is not its answer", w.key), map[string]interface{}{"line": string(quoted)})
			}
			answer, lines = item.data, nil
		case <-exited:
			// What it printed before it exited is still read: lines closes at EOF.
			exited = nil
		case <-timer.C:
			return fail(504, "timeout", fmt.Sprintf("worker '%s' did not answer within %v", w.key, timeout), nil)
		case <-cancel:
			return fail(499, "canceled", "the client went away", nil)
		}
		if answer != nil && !writing {
			return &callResult{status: 200, body: map[string]interface{}{
				"line": string(answer), "stderr": w.stderr.take(), "duration_us": time.Since(started).Microseconds(),
			}}
		}
	}
}

func notRunning(key string) *callResult {
	return &callResult{status: 404, body: map[string]interface{}{"error": "worker '" + key + "' is not running"}}
}

// errNotAWorkerKey names the rule for keys.
var errNotAWorkerKey = errors.New("a worker key is 1-128 characters of letters, digits and _.:@- and begins with a letter or digit")
