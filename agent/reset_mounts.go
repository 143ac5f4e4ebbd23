package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
)

// maxKeptBytes: a regular file of the baseline up to this size is kept whole, so that a reset
// can write it back (the bind-mounted /etc/hosts and the like); a larger one may not change.
const maxKeptBytes = 64 << 10

// maxTreeEntries bounds a baseline: a reusable sandbox's writable mounts start (nearly) empty.
const maxTreeEntries = 10000

// pseudoFilesystems hold no files a command leaves behind: they show the kernel's state
// (processes, cgroups, terminals), which the rest of the reset covers.
var pseudoFilesystems = map[string]bool{"proc": true, "sysfs": true, "cgroup": true, "cgroup2": true, "devpts": true}

// writableMounts lists the mount points of every read-write mount of the sandbox, from
// /proc/self/mountinfo, but the pseudo filesystems. A writable root fails: it cannot be reset.
func writableMounts() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		before, after, ok := strings.Cut(line, " - ")
		fields, tail := strings.Fields(before), strings.Fields(after)
		if !ok || len(fields) < 6 || len(tail) < 1 {
			continue
		}
		point, options, fstype := unescapeMount(fields[4]), strings.Split(fields[5], ","), tail[0]
		if !contains(options, "rw") || pseudoFilesystems[fstype] {
			continue
		}
		if point == "/" {
			return nil, errors.New("the root filesystem is writable: a reusable sandbox needs a read-only one")
		}
		mounts = append(mounts, point)
	}
	sort.Strings(mounts)
	return mounts, nil
}

// entryState is what the baseline keeps of one file, directory or link.
type entryState struct {
	mode    os.FileMode
	uid     uint32
	gid     uint32
	size    int64
	mtimeNs int64
	rdev    uint64
	// content: a kept regular file's bytes, or a link's target.
	content []byte
	kept    bool
	// opaque: an entry that cannot be looked at (only its name is compared).
	opaque bool
	// xattrs of a directory or regular file (tmpfs keeps user.* attributes), name -> value.
	xattrs map[string]string
}

// mountTree is one writable mount as the baseline has it: every entry by its path, without
// descending into the mounts below it (they are trees of their own).
type mountTree struct {
	root    string
	dev     uint64
	entries map[string]entryState
}

func recordTree(root string) (*mountTree, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(root, &st); err != nil {
		return nil, err
	}
	tree := &mountTree{root: root, dev: uint64(st.Dev), entries: map[string]entryState{}}
	err := tree.walk(func(path string, state entryState) error {
		if len(tree.entries) >= maxTreeEntries {
			return fmt.Errorf("more than %d entries", maxTreeEntries)
		}
		tree.entries[path] = state
		return nil
	})
	return tree, err
}

// walk visits the root and everything under it on the same device, parents before children.
// A visit that returns filepath.SkipDir keeps walk out of that directory. An entry that cannot
// be read is skipped, and the first such error is returned once the walk is done.
func (t *mountTree) walk(visit func(path string, state entryState) error) error {
	var first error
	var step func(path string) error
	step = func(path string) error {
		state, dev, err := stateOf(path)
		if errors.Is(err, syscall.EPERM) {
			// gVisor refuses to stat a host socket (the agent's own): it counts by its name.
			state, err = entryState{opaque: true}, nil
		}
		if err != nil {
			if first == nil {
				first = err
			}
			return nil
		}
		if err := visit(path, state); err != nil {
			if errors.Is(err, filepath.SkipDir) {
				return nil
			}
			return err
		}
		if !state.mode.IsDir() || dev != t.dev {
			return nil
		}
		names, err := readNames(path)
		if err != nil && first == nil {
			first = err
		}
		for _, name := range names {
			if err := step(filepath.Join(path, name)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := step(t.root); err != nil {
		return err
	}
	return first
}

func stateOf(path string) (entryState, uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return entryState{}, 0, err
	}
	info, err := os.Lstat(path)
	if err != nil {
		return entryState{}, 0, err
	}
	state := entryState{mode: info.Mode(), uid: st.Uid, gid: st.Gid, size: st.Size, mtimeNs: st.Mtim.Nano(), rdev: uint64(st.Rdev)}
	switch {
	case info.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(path)
		if err != nil {
			return entryState{}, 0, err
		}
		state.content, state.kept = []byte(target), true
	case info.Mode().IsRegular() && st.Size <= maxKeptBytes:
		if content, err := os.ReadFile(path); err == nil {
			state.content, state.kept = content, true
		}
	}
	if info.IsDir() || info.Mode().IsRegular() {
		state.xattrs = xattrsOf(path)
	}
	return state, uint64(st.Dev), nil
}

// xattrsOf reads every extended attribute of path that the agent may read (none where the
// filesystem keeps none).
func xattrsOf(path string) map[string]string {
	size, err := syscall.Listxattr(path, nil)
	if err != nil || size <= 0 {
		return nil
	}
	list := make([]byte, size)
	if size, err = syscall.Listxattr(path, list); err != nil {
		return nil
	}
	attrs := map[string]string{}
	for _, name := range strings.Split(strings.TrimRight(string(list[:size]), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		value := make([]byte, 64<<10)
		if n, err := syscall.Getxattr(path, name, value); err == nil {
			attrs[name] = string(value[:n])
		} else {
			attrs[name] = "\x00unreadable"
		}
	}
	return attrs
}

// sameXattrs compares two attribute sets.
func sameXattrs(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for name, value := range a {
		if other, ok := b[name]; !ok || other != value {
			return false
		}
	}
	return true
}

func readNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	sort.Strings(names)
	return names, err
}

// restore removes what the baseline does not have and writes back what changed. What root
// cannot remove (files of the default user in directories that only the user may change, where
// the agent holds no CAP_DAC_OVERRIDE) is removed by `sandboxd-agent wipe` as that user.
func (t *mountTree) restore(defaultUser string) {
	var extra, attrs []string
	t.walk(func(path string, state entryState) error {
		base, known := t.entries[path]
		if !known {
			if removeAll(path) != nil {
				extra = append(extra, path)
			}
			return filepath.SkipDir
		}
		if !sameEntry(base, state) {
			attrs = append(attrs, t.writeBack(path, base, state)...)
		}
		return nil
	})
	if len(extra) > 0 {
		runAs(defaultUser, "wipe", extra)
	}
	if len(attrs) > 0 {
		runAs(defaultUser, "remove-xattrs", attrs)
	}
}

// writeBack makes path what the baseline had, where root may. It returns the attributes it
// could not remove, as PATH NAME pairs: only the owner may change user.* attributes, and the
// agent may hold no CAP_FOWNER.
func (t *mountTree) writeBack(path string, base, now entryState) (left []string) {
	if base.opaque || now.opaque || base.mode.Type() != now.mode.Type() {
		return nil
	}
	if base.mode.IsRegular() && base.kept && !bytes.Equal(base.content, now.content) {
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			f.Write(base.content)
			f.Close()
		}
	}
	if base.mode&os.ModeSymlink == 0 && base.mode.Perm() != now.mode.Perm() {
		os.Chmod(path, base.mode&(os.ModePerm|os.ModeSticky|os.ModeSetuid|os.ModeSetgid))
	}
	if base.uid != now.uid || base.gid != now.gid {
		os.Lchown(path, int(base.uid), int(base.gid))
	}
	for name := range now.xattrs {
		if _, kept := base.xattrs[name]; !kept && syscall.Removexattr(path, name) != nil {
			left = append(left, path, name)
		}
	}
	for name, value := range base.xattrs {
		if now.xattrs[name] != value {
			syscall.Setxattr(path, name, []byte(value), 0)
		}
	}
	return left
}

// differences names every entry that is not as the baseline has it.
func (t *mountTree) differences() []string {
	var out []string
	seen := map[string]bool{}
	err := t.walk(func(path string, state entryState) error {
		seen[path] = true
		base, known := t.entries[path]
		switch {
		case !known:
			out = append(out, "left behind: "+path)
			return filepath.SkipDir
		case !sameEntry(base, state):
			out = append(out, "changed: "+path)
		}
		return nil
	})
	if err != nil {
		out = append(out, fmt.Sprintf("%s not readable: %v", t.root, err))
	}
	for path := range t.entries {
		if !seen[path] && err == nil {
			out = append(out, "missing: "+path)
		}
	}
	return out
}

// sameEntry compares what a command could have changed: type, permissions, owner, and the
// content (kept files and links) or else size and modification time. A directory's own times
// change with its entries and are not compared.
func sameEntry(base, now entryState) bool {
	if base.opaque || now.opaque {
		return base.opaque == now.opaque
	}
	if base.mode != now.mode || base.uid != now.uid || base.gid != now.gid || base.rdev != now.rdev || !sameXattrs(base.xattrs, now.xattrs) {
		return false
	}
	switch {
	case base.mode.IsDir():
		return true
	case base.kept:
		return now.kept && bytes.Equal(base.content, now.content)
	default:
		return base.size == now.size && base.mtimeNs == now.mtimeNs
	}
}

// removeAll removes a path and everything under it as the agent; directories it may change it
// makes searchable and writable first (a command may have taken those bits away).
func removeAll(path string) error {
	info, err := os.Lstat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	if info.IsDir() {
		os.Chmod(path, 0o700)
		names, _ := readNames(path)
		for _, name := range names {
			removeAll(filepath.Join(path, name))
		}
	}
	return os.Remove(path)
}

// runAs runs `sandboxd-agent COMMAND ARGS...` as user and waits for it.
func runAs(user, command string, args []string) {
	id, err := resolveUser("", user)
	if err != nil || id.uid == 0 {
		return
	}
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: append([]string{"sandboxd-agent", command}, args...)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: id.uid, Gid: id.gid, Groups: id.groups}}
	_ = runInternal(cmd)
}

// wipeCommand is `sandboxd-agent wipe PATH...`: removeAll of each path as the calling user.
func wipeCommand(args []string) int {
	code := 0
	for _, path := range args {
		if err := removeAll(path); err != nil {
			fmt.Fprintln(os.Stderr, "sandboxd-agent wipe:", err)
			code = 1
		}
	}
	return code
}

// removeXattrsCommand is `sandboxd-agent remove-xattrs PATH NAME...` (pairs): removes each
// attribute as the calling user.
func removeXattrsCommand(args []string) int {
	code := 0
	for i := 0; i+1 < len(args); i += 2 {
		if err := syscall.Removexattr(args[i], args[i+1]); err != nil {
			fmt.Fprintln(os.Stderr, "sandboxd-agent remove-xattrs:", args[i], args[i+1], err)
			code = 1
		}
	}
	return code
}

// unescapeMount decodes the octal escapes of mountinfo (\040 for a space and the like).
func unescapeMount(field string) string {
	if !strings.Contains(field, `\`) {
		return field
	}
	var out strings.Builder
	for i := 0; i < len(field); i++ {
		if field[i] == '\\' && i+3 < len(field) {
			var value byte
			if _, err := fmt.Sscanf(field[i+1:i+4], "%03o", &value); err == nil {
				out.WriteByte(value)
				i += 3
				continue
			}
		}
		out.WriteByte(field[i])
	}
	return out.String()
}

func contains(list []string, value string) bool {
	for _, item := range list {
		if item == value {
			return true
		}
	}
	return false
}
