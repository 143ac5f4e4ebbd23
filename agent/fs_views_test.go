package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestFileViews(t *testing.T) {
	for mode, a := range fileModes(t) {
		t.Run(mode, func(t *testing.T) {
			c := serveAgent(t, a)
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "b.txt"), []byte("hello"), 0o640)
			os.Mkdir(filepath.Join(dir, "a-dir"), 0o755)
			os.Symlink("b.txt", filepath.Join(dir, "c-link"))
			status, body := fileRequest(t, c, http.MethodGet, dir+"&op=list", nil)
			var listing fsListing
			if status != 200 || json.Unmarshal(body, &listing) != nil {
				t.Fatalf("list: %d %s", status, body)
			}
			if listing.Path != dir || listing.Truncated || len(listing.Entries) != 3 {
				t.Fatalf("listing: %+v", listing)
			}
			got := []string{}
			for _, entry := range listing.Entries {
				got = append(got, entry.Name+":"+entry.Type)
			}
			if strings.Join(got, ",") != "a-dir:dir,b.txt:file,c-link:symlink" {
				t.Fatalf("entries: %v", got)
			}
			file := listing.Entries[1]
			if file.Size != 5 || file.Mode != "0640" {
				t.Fatalf("file entry: %+v", file)
			}
			if _, err := time.Parse(time.RFC3339, file.Mtime); err != nil {
				t.Fatalf("mtime %q: %v", file.Mtime, err)
			}
			status, body = fileRequest(t, c, http.MethodGet, filepath.Join(dir, "b.txt")+"&op=stat", nil)
			var entry fsEntry
			if status != 200 || json.Unmarshal(body, &entry) != nil || entry.Path != filepath.Join(dir, "b.txt") || entry.Type != "file" {
				t.Fatalf("stat: %d %s", status, body)
			}
			if status, body := fileRequest(t, c, http.MethodGet, filepath.Join(dir, "missing")+"&op=stat", nil); status != 404 {
				t.Fatalf("stat of a missing path: %d %s", status, body)
			}
			if status, body := fileRequest(t, c, http.MethodGet, filepath.Join(dir, "b.txt")+"&op=list", nil); status != 400 || !strings.Contains(string(body), "not a directory") {
				t.Fatalf("list of a file: %d %s", status, body)
			}
		})
	}
}

func TestListingIsBounded(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 5; i++ {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), nil, 0o644)
	}
	listing, err := listDirectory(dir, 3)
	if err != nil || !listing.Truncated || len(listing.Entries) != 3 || listing.Entries[2].Name != "f2" {
		t.Fatalf("%+v %v", listing, err)
	}
}

// watchEvents opens a watch and returns its events as they come; cancel ends it.
func watchEvents(t *testing.T, c *http.Client, query string) (<-chan fsEvent, context.CancelFunc, int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	request, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agent/v1/fs/watch?"+query, nil)
	res, err := c.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan fsEvent, 100)
	if res.StatusCode != 200 {
		res.Body.Close()
		close(events)
		return events, cancel, res.StatusCode
	}
	go func() {
		defer close(events)
		defer res.Body.Close()
		scanner := bufio.NewScanner(res.Body)
		for scanner.Scan() {
			var event fsEvent
			json.Unmarshal(scanner.Bytes(), &event)
			events <- event
		}
	}()
	t.Cleanup(cancel)
	return events, cancel, 200
}

func nextEvent(t *testing.T, events <-chan fsEvent) fsEvent {
	t.Helper()
	select {
	case event := <-events:
		return event
	case <-time.After(time.Second):
		t.Fatal("no event within a second")
	}
	return fsEvent{}
}

func TestWatch(t *testing.T) {
	for mode, a := range fileModes(t) {
		t.Run(mode, func(t *testing.T) {
			c := serveAgent(t, a)
			dir := t.TempDir()
			events, cancel, status := watchEvents(t, c, "path="+dir)
			if status != 200 {
				t.Fatalf("watch: %d", status)
			}
			file := filepath.Join(dir, "a.txt")
			os.WriteFile(file, []byte("one"), 0o644)
			if e := nextEvent(t, events); e.Event != "created" || e.Path != file || e.Type != "file" {
				t.Fatalf("create: %+v", e)
			}
			time.Sleep(2 * coalesceWindow)
			appendTo(file, "two")
			if e := nextEvent(t, events); e.Event != "modified" || e.Path != file {
				t.Fatalf("modify: %+v", e)
			}
			// Recursive: a new directory is watched, and what it holds is reported.
			sub := filepath.Join(dir, "sub")
			os.Mkdir(sub, 0o755)
			if e := nextEvent(t, events); e.Event != "created" || e.Path != sub || e.Type != "dir" {
				t.Fatalf("mkdir: %+v", e)
			}
			time.Sleep(2 * coalesceWindow)
			deep := filepath.Join(sub, "deep.txt")
			os.WriteFile(deep, nil, 0o644)
			if e := nextEvent(t, events); e.Event != "created" || e.Path != deep {
				t.Fatalf("create below: %+v", e)
			}
			os.Remove(file)
			if e := nextEvent(t, events); e.Event != "deleted" || e.Path != file {
				t.Fatalf("delete: %+v", e)
			}
			if atomic.LoadInt64(&activeWatches) != 1 {
				t.Fatalf("active watches: %d", activeWatches)
			}
			cancel()
			deadline := time.Now().Add(2 * time.Second)
			for atomic.LoadInt64(&activeWatches) != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := atomic.LoadInt64(&activeWatches); n != 0 {
				t.Fatalf("the watch outlived its client: %d active", n)
			}
		})
	}
}

func TestWatchRefusals(t *testing.T) {
	c := startAgent(t)
	if _, _, status := watchEvents(t, c, "path="+filepath.Join(t.TempDir(), "missing")); status != 404 {
		t.Fatalf("missing path: %d", status)
	}
	if _, _, status := watchEvents(t, c, "path=relative"); status != 400 {
		t.Fatalf("relative path: %d", status)
	}
}

func TestWatchEndsWhenItsPathIsDeleted(t *testing.T) {
	c := startAgent(t)
	dir := filepath.Join(t.TempDir(), "gone")
	os.Mkdir(dir, 0o755)
	events, _, _ := watchEvents(t, c, "path="+dir+"&recursive=false")
	os.Remove(dir)
	if e := nextEvent(t, events); e.Event != "deleted" || e.Path != dir || e.Type != "dir" {
		t.Fatalf("%+v", e)
	}
	if _, open := <-events; open {
		t.Fatal("the stream did not end")
	}
}

func TestWatchBoundsItsDirectories(t *testing.T) {
	dir := t.TempDir()
	for i := 0; i < 4; i++ {
		os.Mkdir(filepath.Join(dir, fmt.Sprint(i)), 0o755)
	}
	w, err := newWatch(dir, true, 3, func(op func() error) error { return op() })
	if err != nil {
		t.Fatal(err)
	}
	defer w.file.Close()
	if len(w.dirs) != 3 || len(w.found) != 1 || w.found[0].Event != "error" || !strings.Contains(w.found[0].Message, "more than 3") {
		t.Fatalf("dirs %d, found %+v", len(w.dirs), w.found)
	}
}

func TestCoalescer(t *testing.T) {
	c := newCoalescer()
	c.add(fsEvent{Event: "created", Path: "/a"})
	c.add(fsEvent{Event: "modified", Path: "/a"})
	c.add(fsEvent{Event: "created", Path: "/tmp"})
	c.add(fsEvent{Event: "deleted", Path: "/tmp"})
	c.add(fsEvent{Event: "modified", Path: "/b"})
	c.add(fsEvent{Event: "deleted", Path: "/b"})
	got := []string{}
	for _, e := range c.take() {
		got = append(got, e.Event+" "+e.Path)
	}
	if strings.Join(got, ",") != "created /a,deleted /b" {
		t.Fatalf("%v", got)
	}
	if c.size() != 0 {
		t.Fatal("take did not empty it")
	}
}

func appendTo(path, text string) {
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(text)
	f.Close()
}

func TestWatchForgetsADirectoryMovedAway(t *testing.T) {
	c := startAgent(t)
	base := t.TempDir()
	dir, outside := filepath.Join(base, "watched"), filepath.Join(base, "outside")
	os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	events, _, _ := watchEvents(t, c, "path="+dir)
	os.Rename(filepath.Join(dir, "sub"), outside)
	if e := nextEvent(t, events); e.Event != "deleted" || e.Path != filepath.Join(dir, "sub") {
		t.Fatalf("move away: %+v", e)
	}
	time.Sleep(2 * coalesceWindow)
	os.WriteFile(filepath.Join(outside, "x"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "y"), nil, 0o644)
	if e := nextEvent(t, events); e.Path != filepath.Join(dir, "y") {
		t.Fatalf("an event from the moved directory: %+v", e)
	}
}
