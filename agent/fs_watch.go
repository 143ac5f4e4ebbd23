package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// Watches: `GET /v1/fs/watch?path=&recursive=true|false[&user=]` answers 404/400/403 like a read
// when the path cannot be seen by the user, else 200 and then one JSON line per event,
// `{"event":"created|modified|deleted","path":...,"type":"file|dir"}` or
// `{"event":"error","message":...}`, until the client goes away (the watch ends with it) or the
// watched path is deleted. Events come from inotify, coalesced per path over coalesceWindow
// (a write that creates a file is one `created`); a recursive watch adds a watch to every
// directory below, up to maxWatches (then one `error` event says the rest is not watched).

const (
	maxWatches     = 8192
	coalesceWindow = 50 * time.Millisecond
	// maxPending paths are sent at once rather than held for the window.
	maxPending = 4096
	watchMask  = syscall.IN_CREATE | syscall.IN_DELETE | syscall.IN_MODIFY | syscall.IN_CLOSE_WRITE | syscall.IN_ATTRIB |
		syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO | syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF
)

// activeWatches counts the watches under way (GET /v1/fs/watches).
var activeWatches int64

// fsEvent is one line of a watch's stream.
type fsEvent struct {
	Event   string `json:"event"`
	Path    string `json:"path,omitempty"`
	Type    string `json:"type,omitempty"`
	Message string `json:"message,omitempty"`
}

func (a *agent) handleWatchCount(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]int64{"active": atomic.LoadInt64(&activeWatches)})
}

func (a *agent) handleWatch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "use GET")
		return
	}
	path := r.URL.Query().Get("path")
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		writeError(w, http.StatusBadRequest, "path must be absolute and normalised")
		return
	}
	id, err := resolveUser(r.URL.Query().Get("user"), a.defaultUser)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// The user's credentials where threads can hold them: the kernel then checks that the user
	// may read what is watched. Elsewhere (gVisor) the path is checked, and watched as root.
	as := func(op func() error) error { return op() }
	if a.fileThreads && !(a.dropCaps && id.uid == 0) {
		as = func(op func() error) error { return asUser(id, op) }
	}
	watch, err := newWatch(path, r.URL.Query().Get("recursive") != "false", maxWatches, as)
	if err != nil {
		writeFileError(w, path, err)
		return
	}
	atomic.AddInt64(&activeWatches, 1)
	defer atomic.AddInt64(&activeWatches, -1)
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	if flusher != nil {
		flusher.Flush()
	}
	encoder := json.NewEncoder(w)
	watch.run(r.Context(), func(events []fsEvent) error {
		for _, event := range events {
			if err := encoder.Encode(event); err != nil {
				return err
			}
		}
		if flusher != nil {
			flusher.Flush()
		}
		return nil
	})
}

// watch is one inotify instance over a path (and, recursive, every directory below it).
type watch struct {
	file      *os.File
	fd        int
	root      string
	recursive bool
	rootIsDir bool
	limit     int
	as        func(func() error) error
	dirs      map[int32]string
	exceeded  bool
	// found holds what adding watches reports: `created` for what a new directory holds, errors.
	found []fsEvent
}

// newWatch checks the path as the user and sets the watches up.
func newWatch(path string, recursive bool, limit int, as func(func() error) error) (*watch, error) {
	var info os.FileInfo
	if err := as(func() (err error) { info, err = os.Stat(path); return err }); err != nil {
		return nil, err
	}
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	// A non-blocking descriptor goes to Go's poller: Close ends a Read that waits.
	w := &watch{file: os.NewFile(uintptr(fd), "inotify"), fd: fd, root: path, recursive: recursive && info.IsDir(), rootIsDir: info.IsDir(), limit: limit, as: as, dirs: map[int32]string{}}
	if err := w.add(path, false); err != nil {
		w.file.Close()
		return nil, err
	}
	return w, nil
}

// add watches dir, and with recursive every directory below it; with report, what it holds is
// reported as created (it may have been made before its watch).
func (w *watch) add(dir string, report bool) error {
	if !w.recursive {
		return w.as(func() error { return w.addOne(dir) })
	}
	return w.as(func() error {
		first := true
		return filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
			isRoot := first
			first = false
			if err != nil {
				if isRoot {
					return err
				}
				return nil
			}
			if report && !isRoot {
				w.found = append(w.found, fsEvent{Event: "created", Path: path, Type: eventType(info.IsDir())})
			}
			if !info.IsDir() {
				return nil
			}
			if len(w.dirs) >= w.limit {
				if !w.exceeded {
					w.exceeded = true
					w.found = append(w.found, fsEvent{Event: "error", Message: fmt.Sprintf("more than %d directories under %s: the rest are not watched", w.limit, w.root)})
				}
				return filepath.SkipDir
			}
			if err := w.addOne(path); err != nil {
				if isRoot {
					return err
				}
				if errors.Is(err, syscall.ENOSPC) && !w.exceeded {
					w.exceeded = true
					w.found = append(w.found, fsEvent{Event: "error", Message: fmt.Sprintf("the kernel's limit of inotify watches is reached under %s: the rest is not watched", w.root)})
				}
				return filepath.SkipDir
			}
			return nil
		})
	})
}

func (w *watch) addOne(path string) error {
	wd, err := syscall.InotifyAddWatch(w.fd, path, watchMask)
	if err != nil {
		return err
	}
	w.dirs[int32(wd)] = path
	return nil
}

func eventType(dir bool) string {
	if dir {
		return "dir"
	}
	return "file"
}

// run sends coalesced events until ctx ends, send fails or the root is gone.
func (w *watch) run(ctx context.Context, send func([]fsEvent) error) {
	raw := make(chan []byte, 64)
	go func() {
		defer close(raw)
		for {
			buffer := make([]byte, 64<<10)
			n, err := w.file.Read(buffer)
			if err != nil {
				return
			}
			raw <- buffer[:n]
		}
	}()
	defer func() {
		w.file.Close()
		for range raw {
		}
	}()
	pending := newCoalescer()
	for _, found := range w.found {
		pending.add(found)
	}
	w.found = nil
	var timer <-chan time.Time
	if pending.size() > 0 {
		timer = time.After(0)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case chunk, ok := <-raw:
			if !ok {
				return
			}
			rootGone := w.parse(chunk, pending)
			if rootGone || pending.size() >= maxPending {
				if send(pending.take()) != nil || rootGone {
					return
				}
				timer = nil
			} else if timer == nil && pending.size() > 0 {
				timer = time.After(coalesceWindow)
			}
		case <-timer:
			timer = nil
			if send(pending.take()) != nil {
				return
			}
		}
	}
}

// parse reads inotify events into pending; it reports whether the watched path itself is gone.
func (w *watch) parse(chunk []byte, pending *coalescer) bool {
	rootGone := false
	for offset := 0; offset+syscall.SizeofInotifyEvent <= len(chunk); {
		event := (*syscall.InotifyEvent)(unsafe.Pointer(&chunk[offset]))
		nameBytes := chunk[offset+syscall.SizeofInotifyEvent : offset+syscall.SizeofInotifyEvent+int(event.Len)]
		offset += syscall.SizeofInotifyEvent + int(event.Len)
		name := string(trimNul(nameBytes))
		dir, known := w.dirs[event.Wd]
		mask := event.Mask
		switch {
		case mask&syscall.IN_Q_OVERFLOW != 0:
			pending.add(fsEvent{Event: "error", Message: "events were lost: the kernel's event queue overflowed"})
			continue
		case mask&syscall.IN_IGNORED != 0:
			delete(w.dirs, event.Wd)
			if dir == w.root {
				rootGone = true
			}
			continue
		case !known:
			continue
		}
		path := dir
		if name != "" {
			path = filepath.Join(dir, name)
		}
		kind := eventType(mask&syscall.IN_ISDIR != 0)
		switch {
		case mask&(syscall.IN_DELETE_SELF|syscall.IN_MOVE_SELF) != 0:
			if dir == w.root {
				pending.add(fsEvent{Event: "deleted", Path: w.root, Type: eventType(w.rootIsDir)})
				rootGone = true
			} else if mask&syscall.IN_MOVE_SELF != 0 {
				// Moved away: its parent reported it deleted, and its path no longer holds.
				syscall.InotifyRmWatch(w.fd, uint32(event.Wd))
				delete(w.dirs, event.Wd)
			}
		case mask&(syscall.IN_CREATE|syscall.IN_MOVED_TO) != 0:
			pending.add(fsEvent{Event: "created", Path: path, Type: kind})
			if kind == "dir" && w.recursive {
				w.add(path, true)
				for _, found := range w.found {
					pending.add(found)
				}
				w.found = nil
			}
		case mask&(syscall.IN_DELETE|syscall.IN_MOVED_FROM) != 0:
			pending.add(fsEvent{Event: "deleted", Path: path, Type: kind})
		case mask&(syscall.IN_MODIFY|syscall.IN_CLOSE_WRITE|syscall.IN_ATTRIB) != 0:
			if name == "" && dir != w.root {
				continue // the directory's own attributes; its parent reports them
			}
			pending.add(fsEvent{Event: "modified", Path: path, Type: kind})
		}
	}
	return rootGone
}

func trimNul(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// coalescer merges a path's events within a window: created then modified is created, created
// then deleted is nothing, modified then deleted is deleted, deleted then created is modified.
type coalescer struct {
	order  []string
	events map[string]fsEvent
	errors []fsEvent
}

func newCoalescer() *coalescer { return &coalescer{events: map[string]fsEvent{}} }

func (c *coalescer) size() int { return len(c.events) + len(c.errors) }

func (c *coalescer) add(event fsEvent) {
	if event.Event == "error" {
		c.errors = append(c.errors, event)
		return
	}
	previous, seen := c.events[event.Path]
	if !seen {
		c.order = append(c.order, event.Path)
		c.events[event.Path] = event
		return
	}
	merged := event
	switch {
	case previous.Event == "created" && event.Event == "modified":
		merged = previous
	case previous.Event == "created" && event.Event == "deleted":
		merged.Event = ""
	case previous.Event == "deleted" && event.Event == "created":
		merged.Event = "modified"
	}
	c.events[event.Path] = merged
}

// take returns the events in the order their paths first changed, and empties the coalescer.
func (c *coalescer) take() []fsEvent {
	out := c.errors
	for _, path := range c.order {
		if event := c.events[path]; event.Event != "" {
			out = append(out, event)
		}
	}
	c.order, c.events, c.errors = nil, map[string]fsEvent{}, nil
	return out
}
