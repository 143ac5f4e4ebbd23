package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// handleWorkerList is GET /v1/workers: the running workers, by key.
func (a *agent) handleWorkerList(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	writeJSON(w, http.StatusOK, a.workers.list())
}

// handleWorkerItem serves PUT and DELETE /v1/workers/{key} and POST /v1/workers/{key}/call.
func (a *agent) handleWorkerItem(w http.ResponseWriter, r *http.Request) {
	key, sub, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/v1/workers/"), "/")
	if !workerKeyPattern.MatchString(key) {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("worker key %q: %v", key, errNotAWorkerKey))
		return
	}
	switch {
	case sub == "" && r.Method == http.MethodPut:
		a.handleWorkerEnsure(w, r, key)
	case sub == "" && r.Method == http.MethodDelete:
		if !a.workers.stop(key) {
			writeError(w, http.StatusNotFound, "worker '"+key+"' is not running")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"key": key})
	case sub == "call" && r.Method == http.MethodPost:
		a.handleWorkerCall(w, r, key)
	case sub == "" || sub == "call":
		writeError(w, http.StatusMethodNotAllowed, "use PUT or DELETE /v1/workers/{key}, POST /v1/workers/{key}/call")
	default:
		writeError(w, http.StatusNotFound, "no such route")
	}
}

// handleWorkerEnsure is PUT /v1/workers/{key} with a spec: the worker runs when it answers.
func (a *agent) handleWorkerEnsure(w http.ResponseWriter, r *http.Request, key string) {
	var s spec
	if err := decodeBody(w, r, &s); err != nil {
		writeError(w, http.StatusBadRequest, "worker request: "+err.Error())
		return
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		writeError(w, http.StatusBadRequest, "argv: must be a non-empty array of strings")
		return
	}
	item, started, err := a.workers.ensure(key, s, a.defaultUser, a.dropCaps)
	var start *startError
	switch {
	case errors.Is(err, errTooManyWorkers):
		writeError(w, http.StatusTooManyRequests, err.Error())
	case errors.As(err, &start):
		// As exec reports it: 127 for a missing program, 126 for one that cannot run.
		writeJSON(w, http.StatusUnprocessableEntity, map[string]interface{}{"error": start.msg, "exit_code": start.code})
	case err != nil:
		writeError(w, http.StatusInternalServerError, err.Error())
	default:
		view := item.view()
		view.Started = &started
		writeJSON(w, http.StatusOK, view)
	}
}

// handleWorkerCall is POST /v1/workers/{key}/call?nonce=N&timeout_ms=T with the line as the body.
func (a *agent) handleWorkerCall(w http.ResponseWriter, r *http.Request, key string) {
	query := r.URL.Query()
	nonce := query.Get("nonce")
	if !noncePattern.MatchString(nonce) {
		writeError(w, http.StatusBadRequest, "nonce: 1-128 printable ASCII characters without spaces")
		return
	}
	timeoutMs, err := strconv.ParseInt(query.Get("timeout_ms"), 10, 64)
	if err != nil || timeoutMs < 1 || timeoutMs > maxWorkerTimeoutMs {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("timeout_ms: an integer from 1 to %d", maxWorkerTimeoutMs))
		return
	}
	line, status, err := readWorkerLine(w, r)
	if err != nil {
		writeError(w, status, err.Error())
		return
	}
	item := a.workers.get(key)
	if item == nil {
		result := notRunning(key)
		writeJSON(w, result.status, result.body)
		return
	}
	result := a.workers.call(item, nonce, line, time.Duration(timeoutMs)*time.Millisecond, r.Context().Done())
	if result.status == 499 {
		return
	}
	writeJSON(w, result.status, result.body)
}

// readWorkerLine reads a call's body, one line of at most maxWorkerLine bytes, and appends the
// newline that ends it on the worker's stdin.
func readWorkerLine(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	tooLarge := fmt.Errorf("the line is over %d bytes (32 MiB)", maxWorkerLine)
	if r.ContentLength > maxWorkerLine {
		return nil, http.StatusRequestEntityTooLarge, tooLarge
	}
	var buffer bytes.Buffer
	if r.ContentLength > 0 {
		buffer.Grow(int(r.ContentLength) + 1)
	}
	if _, err := buffer.ReadFrom(http.MaxBytesReader(w, r.Body, maxWorkerLine)); err != nil {
		var over *http.MaxBytesError
		if errors.As(err, &over) {
			return nil, http.StatusRequestEntityTooLarge, tooLarge
		}
		return nil, http.StatusBadRequest, fmt.Errorf("reading the line: %w", err)
	}
	if bytes.IndexByte(buffer.Bytes(), '\n') >= 0 {
		return nil, http.StatusBadRequest, errors.New("the line holds a newline: a call is one line")
	}
	buffer.WriteByte('\n')
	return buffer.Bytes(), 0, nil
}
