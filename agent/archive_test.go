package main

import (
	"archive/tar"
	"bytes"
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

func archiveRequest(t *testing.T, c *http.Client, method, query string, body []byte) (int, []byte) {
	t.Helper()
	request, _ := http.NewRequest(method, "http://agent/v1/archive?path="+query, bytes.NewReader(body))
	res, err := c.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s %s: the answer was cut: %v", method, query, err)
	}
	return res.StatusCode, data
}

// tarOf writes entries (a header each, and the content of regular ones) as one archive.
func tarOf(t *testing.T, entries ...tarItem) []byte {
	t.Helper()
	var out bytes.Buffer
	writer := tar.NewWriter(&out)
	for _, entry := range entries {
		entry.header.Size = int64(len(entry.content))
		if entry.header.Mode == 0 {
			entry.header.Mode = 0o644
		}
		if err := writer.WriteHeader(&entry.header); err != nil {
			t.Fatal(err)
		}
		writer.Write([]byte(entry.content))
	}
	writer.Close()
	return out.Bytes()
}

type tarItem struct {
	header  tar.Header
	content string
}

func file(name, content string) tarItem {
	return tarItem{tar.Header{Name: name, Typeflag: tar.TypeReg}, content}
}

func link(name, target string) tarItem {
	return tarItem{tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}, ""}
}

func TestArchivePackAndUnpack(t *testing.T) {
	for mode, a := range fileModes(t) {
		t.Run(mode, func(t *testing.T) {
			c := serveAgent(t, a)
			src := t.TempDir()
			os.MkdirAll(filepath.Join(src, "sub", "deeper"), 0o750)
			os.WriteFile(filepath.Join(src, "sub", "run.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755)
			os.WriteFile(filepath.Join(src, "sub", "deeper", "data.bin"), bytes.Repeat([]byte{0, 1, 2}, 100_000), 0o600)
			os.Symlink("sub/run.sh", filepath.Join(src, "latest"))
			syscall.Mkfifo(filepath.Join(src, "pipe"), 0o640)
			socket, err := net.Listen("unix", filepath.Join(src, "left-out.sock"))
			if err != nil {
				t.Fatal(err)
			}
			defer socket.Close()
			old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
			os.Chtimes(filepath.Join(src, "sub", "run.sh"), old, old)

			status, archive := archiveRequest(t, c, http.MethodGet, src, nil)
			if status != 200 {
				t.Fatalf("pack: %d %s", status, archive)
			}
			names := []string{}
			reader := tar.NewReader(bytes.NewReader(archive))
			for {
				header, err := reader.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if header.Uid != 0 || header.Uname != "" {
					t.Fatalf("%s keeps its owner: %d %q", header.Name, header.Uid, header.Uname)
				}
				names = append(names, header.Name)
			}
			if got := strings.Join(names, ","); got != "latest,pipe,sub/,sub/deeper/,sub/deeper/data.bin,sub/run.sh" {
				t.Fatalf("entries: %s", got)
			}

			// Through a link to the directory, the same entries.
			viaLink := filepath.Join(filepath.Dir(src), "via-link")
			os.Symlink(src, viaLink)
			if status, linked := archiveRequest(t, c, http.MethodGet, viaLink, nil); status != 200 || len(linked) != len(archive) {
				t.Fatalf("pack through a link: %d, %d bytes against %d", status, len(linked), len(archive))
			}

			dst := filepath.Join(t.TempDir(), "new", "place")
			status, body := archiveRequest(t, c, http.MethodPut, dst, archive)
			var summary unpackSummary
			if status != 200 || json.Unmarshal(body, &summary) != nil {
				t.Fatalf("unpack: %d %s", status, body)
			}
			if summary.Path != dst || summary.Entries != 6 || summary.Bytes != 300_000+18 {
				t.Fatalf("summary: %+v", summary)
			}
			data, _ := os.ReadFile(filepath.Join(dst, "sub", "deeper", "data.bin"))
			if !bytes.Equal(data, bytes.Repeat([]byte{0, 1, 2}, 100_000)) {
				t.Fatal("data.bin differs")
			}
			script, _ := os.Stat(filepath.Join(dst, "sub", "run.sh"))
			if script.Mode().Perm() != 0o755 || !script.ModTime().Equal(old) {
				t.Fatalf("run.sh: %v %v", script.Mode(), script.ModTime())
			}
			if dir, _ := os.Stat(filepath.Join(dst, "sub")); dir.Mode().Perm() != 0o750 {
				t.Fatalf("sub: %v", dir.Mode())
			}
			if target, _ := os.Readlink(filepath.Join(dst, "latest")); target != "sub/run.sh" {
				t.Fatalf("latest -> %q", target)
			}
			if pipe, _ := os.Lstat(filepath.Join(dst, "pipe")); pipe == nil || pipe.Mode()&os.ModeNamedPipe == 0 {
				t.Fatal("pipe is not a FIFO")
			}

			// Unpacking again replaces files and links, and merges into directories.
			status, body = archiveRequest(t, c, http.MethodPut, dst, tarOf(t, file("sub/run.sh", "new"), link("latest", "elsewhere")))
			if status != 200 {
				t.Fatalf("second unpack: %d %s", status, body)
			}
			if data, _ := os.ReadFile(filepath.Join(dst, "sub", "run.sh")); string(data) != "new" {
				t.Fatalf("run.sh: %q", data)
			}
			if _, err := os.Stat(filepath.Join(dst, "sub", "deeper", "data.bin")); err != nil {
				t.Fatal("the merge lost data.bin")
			}
		})
	}
}

func TestArchiveRefusals(t *testing.T) {
	c := serveAgent(t, &agent{started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()})
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	os.Mkdir(outside, 0o755)
	os.WriteFile(filepath.Join(outside, "victim"), []byte("intact"), 0o644)
	dst := filepath.Join(base, "dst")
	os.Mkdir(dst, 0o755)
	os.Symlink(outside, filepath.Join(dst, "planted"))
	os.Symlink(filepath.Join(outside, "victim"), filepath.Join(dst, "victim-link"))

	refusals := []struct {
		name    string
		archive []byte
		status  int
		says    string
	}{
		{"a name with ..", tarOf(t, file("../escaped", "x")), 400, "outside the directory"},
		{"a deeper name with ..", tarOf(t, file("a/../../escaped", "x")), 400, "outside the directory"},
		{"an absolute name", tarOf(t, file("/etc/escaped", "x")), 400, "outside the directory"},
		{"a link the archive makes, then a file through it", tarOf(t, link("hop", outside), file("hop/escaped", "x")), 400, "goes through the symbolic link"},
		{"a link already in the directory", tarOf(t, file("planted/escaped", "x")), 400, "goes through the symbolic link"},
		{"a hard link to a file outside", tarOf(t, tarItem{tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "../outside/victim"}, ""}), 400, "outside the directory"},
		{"a hard link through a planted link", tarOf(t, tarItem{tar.Header{Name: "hard", Typeflag: tar.TypeLink, Linkname: "planted/victim"}, ""}), 400, "goes through the symbolic link"},
		{"a device", tarOf(t, tarItem{tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}, ""}), 400, "device"},
		{"a body that is not a tar", []byte(strings.Repeat("not a tar ", 100)), 400, "not a tar archive"},
		{"the directory itself as a file", tarOf(t, file(".", "x")), 400, "names the directory itself"},
	}
	for _, refusal := range refusals {
		status, body := archiveRequest(t, c, http.MethodPut, dst, refusal.archive)
		if status != refusal.status || !strings.Contains(string(body), refusal.says) {
			t.Fatalf("%s: %d %s", refusal.name, status, body)
		}
	}
	// A header that claims more than an unpack may write, with nothing behind it (a sparse entry's trick).
	var huge bytes.Buffer
	tar.NewWriter(&huge).WriteHeader(&tar.Header{Name: "huge", Typeflag: tar.TypeReg, Size: maxUnpackedBytes + 1, Mode: 0o644})
	if status, body := archiveRequest(t, c, http.MethodPut, dst, huge.Bytes()); status != 400 || !strings.Contains(string(body), "unpacks to more than 64 MiB") {
		t.Fatalf("a huge entry: %d %s", status, body)
	}
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Fatalf("something was written outside: %v", entries)
	}
	if data, _ := os.ReadFile(filepath.Join(outside, "victim")); string(data) != "intact" {
		t.Fatalf("the victim changed: %q", data)
	}
	// A file entry over a planted link replaces the link, not what it points to.
	if status, body := archiveRequest(t, c, http.MethodPut, dst, tarOf(t, file("victim-link", "mine"))); status != 200 {
		t.Fatalf("over a link: %d %s", status, body)
	}
	if data, _ := os.ReadFile(filepath.Join(outside, "victim")); string(data) != "intact" {
		t.Fatalf("written through a link: %q", data)
	}

	os.WriteFile(filepath.Join(base, "plain"), []byte("x"), 0o644)
	if status, body := archiveRequest(t, c, http.MethodGet, filepath.Join(base, "plain"), nil); status != 400 || !strings.Contains(string(body), "not a directory") {
		t.Fatalf("pack of a file: %d %s", status, body)
	}
	if status, _ := archiveRequest(t, c, http.MethodGet, filepath.Join(base, "missing"), nil); status != 404 {
		t.Fatalf("pack of a missing directory: %d", status)
	}
	if status, _ := archiveRequest(t, c, http.MethodGet, "relative/dir", nil); status != 400 {
		t.Fatalf("a relative path: %d", status)
	}
	if status, _ := archiveRequest(t, c, http.MethodDelete, base, nil); status != 405 {
		t.Fatalf("DELETE: %d", status)
	}
}

func TestArchiveRespectsTheUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	c := serveAgent(t, &agent{started: time.Now(), detached: newDetachedTable(), workers: newWorkerTable()})
	root, err := os.MkdirTemp("", "agent-archive-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	os.Chmod(root, 0o755)
	os.WriteFile(filepath.Join(root, "secret"), []byte("root's"), 0o600)
	as := func(method, path string, body []byte) (int, string) {
		status, answer := archiveRequest(t, c, method, path+"&user=nobody", body)
		return status, string(answer)
	}
	if status, body := as(http.MethodGet, root, nil); status != 403 || !strings.Contains(body, "permission denied") {
		t.Fatalf("nobody packed a root-only file: %d %s", status, body)
	}
	if status, body := as(http.MethodPut, filepath.Join(root, "new"), tarOf(t, file("x", "y"))); status != 403 {
		t.Fatalf("nobody unpacked into a root directory: %d %s", status, body)
	}
	open := filepath.Join(root, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777)
	if status, body := as(http.MethodPut, open, tarOf(t, file("mine", "y"))); status != 200 {
		t.Fatalf("nobody unpacking into an open directory: %d %s", status, body)
	}
	info, _ := os.Stat(filepath.Join(open, "mine"))
	if info.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Fatalf("unpacked as uid %d", info.Sys().(*syscall.Stat_t).Uid)
	}
}
