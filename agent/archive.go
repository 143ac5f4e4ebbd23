package main

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// maxUnpackedBytes bounds what one unpacked archive writes: the body is bounded by
// maxRequestBytes, but a sparse entry may claim far more than it carries.
const maxUnpackedBytes = maxRequestBytes

// handleArchive serves GET (pack: a tar of what the directory ?path= holds) and PUT (unpack the
// body, a tar, into ?path=, made with its parents), as ?user= (default: the sandbox's default
// user). Both run in a child process with that user's credentials, as file operations do
// (handleFiles), so the kernel makes every permission check and what is unpacked is the user's.
func (a *agent) handleArchive(w http.ResponseWriter, r *http.Request) {
	dir := r.URL.Query().Get("path")
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		writeError(w, http.StatusBadRequest, "path must be absolute and normalised")
		return
	}
	op := map[string]string{http.MethodGet: "pack", http.MethodPut: "unpack"}[r.Method]
	if op == "" {
		writeError(w, http.StatusMethodNotAllowed, "use GET (pack a directory) or PUT (unpack into one)")
		return
	}
	a.fileInChild(w, r, op, dir, r.URL.Query().Get("user"))
}

// archiveError refuses an archive, or an entry of one, in words of its own (exit fileInvalid).
type archiveError struct{ msg string }

func (e *archiveError) Error() string { return e.msg }

// packDirectory writes to stdout the marker byte, then a tar of what dir holds: directories, regular
// files, symbolic links (as links) and FIFOs, names relative to dir; sockets and devices are left
// out. The tree is walked once before the marker, so that what cannot be read is refused with a
// status; what fails after it (a file removed meanwhile) ends the stream early (handleFiles).
func packDirectory(dir string, stdout io.Writer) error {
	info, err := os.Stat(dir)
	if err != nil {
		return err
	}
	// A link to a directory packs the directory (a walk would not follow it).
	if dir, err = filepath.EvalSymlinks(dir); err != nil {
		return err
	}
	if !info.IsDir() {
		return &archiveError{msg: fmt.Sprintf("'%s' is not a directory: a file is read through the files route", dir)}
	}
	if err := walkPackable(dir, func(string, fs.FileInfo) error { return nil }); err != nil {
		return err
	}
	out := bufio.NewWriterSize(stdout, copyBufferSize)
	out.WriteByte(0)
	writer := tar.NewWriter(out)
	err = walkPackable(dir, func(name string, info fs.FileInfo) error {
		return packEntry(writer, dir, name, info)
	})
	if err == nil {
		err = writer.Close()
	}
	if err == nil {
		err = out.Flush()
	}
	return err
}

// walkPackable calls visit for every entry below dir that an archive holds, in lexical order;
// a directory that cannot be listed or a file that cannot be read fails the walk.
func walkPackable(dir string, visit func(name string, info fs.FileInfo) error) error {
	return filepath.WalkDir(dir, func(p string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		info, err := entry.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		if mode&(fs.ModeSocket|fs.ModeDevice|fs.ModeCharDevice) != 0 {
			return nil
		}
		if mode.IsRegular() {
			if err := syscall.Access(p, 4); err != nil {
				return &os.PathError{Op: "open", Path: p, Err: err}
			}
		}
		name, _ := filepath.Rel(dir, p)
		return visit(filepath.ToSlash(name), info)
	})
}

// packEntry writes one entry: its header (owner ids dropped: what is unpacked belongs to whoever
// unpacks it), then a regular file's content, exactly the size the header gives.
func packEntry(writer *tar.Writer, dir, name string, info fs.FileInfo) error {
	full := filepath.Join(dir, filepath.FromSlash(name))
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(full); err != nil {
			return err
		}
	}
	header, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return err
	}
	header.Name = name
	if info.IsDir() {
		header.Name += "/"
	}
	header.Uid, header.Gid, header.Uname, header.Gname = 0, 0, "", ""
	if err := writer.WriteHeader(header); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	file, err := os.OpenFile(full, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer file.Close()
	_, err = io.CopyN(writer, file, header.Size)
	return err
}

// unpackSummary is what an unpack answers: where, how many entries and how many content bytes.
type unpackSummary struct {
	Path    string `json:"path"`
	Entries int    `json:"entries"`
	Bytes   int64  `json:"bytes"`
}

// unpackInto reads a tar from stdin into dir (made with its parents), then writes the marker
// byte and the summary as JSON. Entries are directories, regular files, symbolic and hard links
// and FIFOs, with their permission bits and times; an existing file, link or FIFO is replaced,
// a directory is merged into. An entry is refused, and the unpacking ends there, when its name
// leaves dir (absolute, `..`), when it would be written through a symbolic link (one in dir, or
// one an earlier entry made), when it is a device, or when the content passes maxUnpackedBytes.
func unpackInto(dir string, stdin io.Reader, stdout io.Writer) error {
	defer io.Copy(io.Discard, stdin)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	reader := tar.NewReader(bufio.NewReaderSize(stdin, copyBufferSize))
	summary := unpackSummary{Path: dir}
	type dirAttributes struct {
		path  string
		mode  fs.FileMode
		mtime time.Time
	}
	var dirs []dirAttributes
	for {
		header, err := reader.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return &archiveError{msg: "the body is not a tar archive, or a damaged one: " + strings.TrimPrefix(err.Error(), "archive/tar: ")}
		}
		if header.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := entryName(header.Name)
		if err != nil {
			return err
		}
		if name == "." {
			if header.Typeflag == tar.TypeDir {
				continue
			}
			return &archiveError{msg: fmt.Sprintf("archive entry '%s' names the directory itself, as something else than a directory", header.Name)}
		}
		target := filepath.Join(dir, filepath.FromSlash(name))
		if err := throughNoLink(dir, name); err != nil {
			return err
		}
		perm := fs.FileMode(header.Mode) & fs.ModePerm
		switch header.Typeflag {
		case tar.TypeDir:
			if err := makeDirectory(target); err != nil {
				return err
			}
			dirs = append(dirs, dirAttributes{target, perm, header.ModTime})
		case tar.TypeReg, tar.TypeRegA:
			summary.Bytes += header.Size
			if summary.Bytes > maxUnpackedBytes {
				return &archiveError{msg: fmt.Sprintf("the archive unpacks to more than %d MiB", maxUnpackedBytes>>20)}
			}
			if err := unpackFile(reader, target, perm, header.ModTime); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := replaceable(target); err != nil {
				return err
			}
			if err := os.Symlink(header.Linkname, target); err != nil {
				return err
			}
		case tar.TypeLink:
			source, err := entryName(header.Linkname)
			if err == nil {
				err = throughNoLink(dir, source)
			}
			if err == nil {
				err = replaceable(target)
			}
			if err == nil {
				err = os.Link(filepath.Join(dir, filepath.FromSlash(source)), target)
			}
			if err != nil {
				return err
			}
		case tar.TypeFifo:
			if err := replaceable(target); err != nil {
				return err
			}
			if err := syscall.Mkfifo(target, uint32(perm)); err != nil {
				return &os.PathError{Op: "mkfifo", Path: target, Err: err}
			}
			os.Chmod(target, perm)
		default:
			return &archiveError{msg: fmt.Sprintf("archive entry '%s' is a device or of an unknown type (%q): only directories, files, links and FIFOs are unpacked", header.Name, header.Typeflag)}
		}
		summary.Entries++
	}
	// Directories last, deepest first: writing into one changes its time, and a directory
	// without write permission must have been written into first.
	for i := len(dirs) - 1; i >= 0; i-- {
		os.Chmod(dirs[i].path, dirs[i].mode)
		os.Chtimes(dirs[i].path, dirs[i].mtime, dirs[i].mtime)
	}
	answer, _ := json.Marshal(summary)
	_, err := stdout.Write(append([]byte{0}, answer...))
	return err
}

// entryName is an entry's name, cleaned and relative ("." for the archive's own root); a name
// that is absolute or leaves the root is refused.
func entryName(raw string) (string, error) {
	name := path.Clean(raw)
	if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") || strings.ContainsRune(name, 0) {
		return "", &archiveError{msg: fmt.Sprintf("archive entry '%s' is outside the directory: names must be relative, without '..'", raw)}
	}
	return name, nil
}

// throughNoLink refuses a name whose parents inside dir include a symbolic link (which would
// take the entry elsewhere), or something that is not a directory. A missing parent is made.
func throughNoLink(dir, name string) error {
	current := dir
	parts := strings.Split(name, "/")
	for _, part := range parts[:len(parts)-1] {
		current = filepath.Join(current, part)
		info, err := os.Lstat(current)
		if errors.Is(err, fs.ErrNotExist) {
			return os.MkdirAll(filepath.Join(dir, filepath.Dir(filepath.FromSlash(name))), 0o755)
		}
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return &archiveError{msg: fmt.Sprintf("archive entry '%s' goes through the symbolic link '%s'", name, current)}
		}
		if !info.IsDir() {
			return &os.PathError{Op: "mkdir", Path: current, Err: syscall.ENOTDIR}
		}
	}
	return nil
}

// replaceable removes what is at target unless it is a directory (EISDIR: an entry does not
// replace a directory); nothing there is fine.
func replaceable(target string) error {
	info, err := os.Lstat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if info.IsDir() {
		return &os.PathError{Op: "create", Path: target, Err: syscall.EISDIR}
	}
	return os.Remove(target)
}

// makeDirectory makes target a directory: one that is there stays, anything else is replaced.
func makeDirectory(target string) error {
	if info, err := os.Lstat(target); err == nil && info.IsDir() {
		return nil
	}
	if err := replaceable(target); err != nil {
		return err
	}
	return os.Mkdir(target, 0o755)
}

// unpackFile writes one regular file's content, never through a link at target.
func unpackFile(reader io.Reader, target string, perm fs.FileMode, mtime time.Time) error {
	if err := replaceable(target); err != nil {
		return err
	}
	file, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := copyLarge(file, reader); err != nil {
		file.Close()
		return err
	}
	if err := file.Close(); err != nil {
		return err
	}
	os.Chmod(target, perm)
	return os.Chtimes(target, mtime, mtime)
}
