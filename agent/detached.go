package main

import (
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// detachedLogBytes is the output kept per stream of a detached process: the most recent bytes.
const detachedLogBytes = 4 << 20

// tailBuffer keeps the last `limit` bytes written to it.
type tailBuffer struct {
	mu      sync.Mutex
	data    []byte
	limit   int
	dropped int64
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.data = append(t.data, p...)
	if over := len(t.data) - t.limit; over > 0 {
		t.dropped += int64(over)
		t.data = append(t.data[:0], t.data[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) snapshot() ([]byte, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]byte(nil), t.data...), t.dropped
}

// detachedProcess is a command that runs on after the request that started it.
type detachedProcess struct {
	ID         string     `json:"id"`
	Pid        int        `json:"pid"`
	Argv       []string   `json:"argv"`
	Status     string     `json:"status"` // running, completed (exit 0), failed (non-zero), killed (by DELETE)
	ExitCode   *int       `json:"exit_code"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	proc       *process
	killed     bool          // a DELETE killed it; guarded by the table's lock
	ended      chan struct{} // closed once its status is final
	stdout     *tailBuffer
	stderr     *tailBuffer
}

type detachedTable struct {
	mu    sync.Mutex
	next  int
	items map[string]*detachedProcess
}

func newDetachedTable() *detachedTable { return &detachedTable{items: map[string]*detachedProcess{}} }

// handleDetachedList: POST starts a detached process, GET lists them.
func (a *agent) handleDetachedList(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, a.detached.list())
	case http.MethodPost:
		var s spec
		if err := decodeBody(w, r, &s); err != nil {
			writeError(w, http.StatusBadRequest, "detached request: "+err.Error())
			return
		}
		item, err := a.detached.start(s, a.defaultUser, a.dropCaps)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		writeJSON(w, http.StatusOK, item)
	default:
		writeError(w, http.StatusMethodNotAllowed, "use GET or POST")
	}
}

// handleDetachedItem: GET /v1/detached/{id}, GET /v1/detached/{id}/logs?stream=, DELETE kills.
func (a *agent) handleDetachedItem(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/v1/detached/")
	id, sub, _ := strings.Cut(rest, "/")
	item := a.detached.get(id)
	if item == nil {
		writeError(w, http.StatusNotFound, "detached command '"+id+"' not found")
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, a.detached.view(item))
	case sub == "" && r.Method == http.MethodDelete:
		if a.detached.markKilled(item) {
			item.proc.killTree()
			runs.release(item.proc)
			// The answer carries the final status: SIGKILL ends the tree at once, so the wait is short.
			select {
			case <-item.ended:
			case <-time.After(5 * time.Second):
			}
		}
		writeJSON(w, http.StatusOK, a.detached.view(item))
	case sub == "logs" && r.Method == http.MethodGet:
		stream := r.URL.Query().Get("stream")
		var buffer *tailBuffer
		switch stream {
		case "", "stdout":
			buffer = item.stdout
		case "stderr":
			buffer = item.stderr
		default:
			writeError(w, http.StatusBadRequest, "stream must be stdout or stderr")
			return
		}
		data, dropped := buffer.snapshot()
		w.Header().Set("X-Sandboxd-Dropped-Bytes", strconv.FormatInt(dropped, 10))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(data)
	default:
		writeError(w, http.StatusNotFound, "no such route")
	}
}

func (t *detachedTable) start(s spec, defaultUser string, dropCaps bool) (*detachedProcess, error) {
	stdout := &tailBuffer{limit: detachedLogBytes}
	stderr := &tailBuffer{limit: detachedLogBytes}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	proc, err := startProcess(s, defaultUser, dropCaps, nil, outW, errW)
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	// What it leaves running after its own exit is wanted: only its DELETE or a reset kills it.
	runs.keep(proc)
	go func() { io.Copy(stdout, outR); outR.Close() }()
	go func() { io.Copy(stderr, errR); errR.Close() }()
	t.mu.Lock()
	t.next++
	item := &detachedProcess{
		ID: strconv.Itoa(t.next), Pid: proc.pid, Argv: s.Argv, Status: "running",
		StartedAt: time.Now().UTC(), proc: proc, stdout: stdout, stderr: stderr, ended: make(chan struct{}),
	}
	t.items[item.ID] = item
	t.mu.Unlock()
	go func() {
		code := exitCode(<-proc.done)
		now := time.Now().UTC()
		t.mu.Lock()
		defer t.mu.Unlock()
		item.ExitCode, item.FinishedAt = &code, &now
		switch {
		case item.killed:
			item.Status = "killed"
		case code == 0:
			item.Status = "completed"
		default:
			item.Status = "failed"
		}
		close(item.ended)
	}()
	return t.view(item), nil
}

// markKilled records that a DELETE kills the item; false when it has already ended.
func (t *detachedTable) markKilled(item *detachedProcess) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if item.Status != "running" {
		return false
	}
	item.killed = true
	return true
}

func (t *detachedTable) get(id string) *detachedProcess {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.items[id]
}

// view is a copy of an item taken under the lock, safe to encode.
func (t *detachedTable) view(item *detachedProcess) *detachedProcess {
	t.mu.Lock()
	defer t.mu.Unlock()
	copied := *item
	return &copied
}

func (t *detachedTable) list() []*detachedProcess {
	t.mu.Lock()
	ids := make([]string, 0, len(t.items))
	for id := range t.items {
		ids = append(ids, id)
	}
	t.mu.Unlock()
	sort.Slice(ids, func(i, j int) bool { a, _ := strconv.Atoi(ids[i]); b, _ := strconv.Atoi(ids[j]); return a < b })
	out := make([]*detachedProcess, 0, len(ids))
	for _, id := range ids {
		out = append(out, t.view(t.get(id)))
	}
	return out
}
