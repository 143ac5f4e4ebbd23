package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// File system views: `GET /v1/files?op=list&path=DIR` lists a directory and `?op=stat` describes
// one path, as JSON, with the same user, credentials and errors as a read (files.go): the
// listing runs on a thread with the user's credentials or in a child process as the user.

// maxListEntries bounds a listing: a directory with more entries answers the first ones by
// name, with `truncated`.
const maxListEntries = 10000

// fsEntry is one file as the views describe it.
type fsEntry struct {
	Path  string `json:"path,omitempty"`
	Name  string `json:"name"`
	Type  string `json:"type"`
	Size  int64  `json:"size"`
	Mode  string `json:"mode"`
	Mtime string `json:"mtime"`
}

// fsListing is the answer to a listing.
type fsListing struct {
	Path      string    `json:"path"`
	Entries   []fsEntry `json:"entries"`
	Truncated bool      `json:"truncated"`
}

// notDirectoryError refuses to list a path that is not a directory.
type notDirectoryError struct{}

func (notDirectoryError) Error() string { return "not a directory" }

// isView says whether a file operation answers a view (JSON) rather than a file's bytes.
func isView(op string) bool { return op == "list" || op == "stat" }

// viewOf answers a view operation as JSON bytes; it runs with the caller's credentials.
func viewOf(op, path string) ([]byte, error) {
	if op == "stat" {
		info, err := os.Lstat(path)
		if err != nil {
			return nil, err
		}
		entry := entryOf(filepath.Base(path), info)
		entry.Path = path
		return json.Marshal(entry)
	}
	listing, err := listDirectory(path, maxListEntries)
	if err != nil {
		return nil, err
	}
	return json.Marshal(listing)
}

// listDirectory lists dir's entries sorted by name, at most limit of them. An entry removed
// between the read of the names and its lstat is left out.
func listDirectory(dir string, limit int) (*fsListing, error) {
	file, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	if info, err := file.Stat(); err != nil {
		return nil, err
	} else if !info.IsDir() {
		return nil, notDirectoryError{}
	}
	names, err := file.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	listing := &fsListing{Path: dir, Entries: []fsEntry{}}
	if len(names) > limit {
		names, listing.Truncated = names[:limit], true
	}
	for _, name := range names {
		if info, err := os.Lstat(filepath.Join(dir, name)); err == nil {
			listing.Entries = append(listing.Entries, entryOf(name, info))
		}
	}
	return listing, nil
}

// entryOf describes a file: its type, size, permission bits in octal (with setuid, setgid and
// sticky) and modification time.
func entryOf(name string, info fs.FileInfo) fsEntry {
	mode := info.Mode()
	bits := uint32(mode.Perm())
	for flag, bit := range map[fs.FileMode]uint32{fs.ModeSetuid: 0o4000, fs.ModeSetgid: 0o2000, fs.ModeSticky: 0o1000} {
		if mode&flag != 0 {
			bits |= bit
		}
	}
	return fsEntry{
		Name:  name,
		Type:  fsTypeOf(mode),
		Size:  info.Size(),
		Mode:  fmt.Sprintf("%04o", bits),
		Mtime: info.ModTime().UTC().Format(time.RFC3339Nano),
	}
}

func fsTypeOf(mode fs.FileMode) string {
	switch {
	case mode.IsRegular():
		return "file"
	case mode.IsDir():
		return "dir"
	case mode&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}

// printView is `sandboxd-agent file list|stat PATH`: the read marker, then the view's JSON.
func printView(op, path string) error {
	view, err := viewOf(op, path)
	if err != nil {
		return err
	}
	out := bufio.NewWriter(os.Stdout)
	out.WriteByte(0)
	out.Write(view)
	return out.Flush()
}
