package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// withAccounts points the account databases at files holding passwd and group (a missing
// file when the text is ""), for the duration of the test.
func withAccounts(t *testing.T, passwd, group string) {
	t.Helper()
	dir := t.TempDir()
	oldPasswd, oldGroup := passwdFile, groupFile
	passwdFile, groupFile = filepath.Join(dir, "passwd"), filepath.Join(dir, "group")
	t.Cleanup(func() { passwdFile, groupFile = oldPasswd, oldGroup })
	for path, text := range map[string]string{passwdFile: passwd, groupFile: group} {
		if text != "" {
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestResolveUserWithoutAccountDatabase(t *testing.T) {
	withAccounts(t, "", "")
	cases := []struct {
		spec string
		want identity
	}{
		{"root", identity{uid: 0, gid: 0, groups: []uint32{0}, name: "root", home: "/"}},
		{"", identity{uid: 0, gid: 0, groups: []uint32{0}, name: "root", home: "/"}},
		{"0", identity{uid: 0, gid: 0, groups: []uint32{0}, name: "root", home: "/"}},
		// As Docker: a uid without an entry runs with gid 0.
		{"1234", identity{uid: 1234, gid: 0, groups: []uint32{0}, name: "1234", home: "/"}},
		{"1234:5", identity{uid: 1234, gid: 5, groups: []uint32{5}, name: "1234", home: "/"}},
	}
	for _, c := range cases {
		got, err := resolveUser(c.spec, "")
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("resolveUser(%q) = %+v, %v; want %+v", c.spec, got, err, c.want)
		}
	}
	for _, spec := range []string{"sandbox", "root:wheel"} {
		if _, err := resolveUser(spec, ""); err == nil || !strings.HasPrefix(err.Error(), "unknown ") {
			t.Errorf("resolveUser(%q): %v, want an unknown user or group", spec, err)
		}
	}
}

func TestResolveUserFromAccountDatabase(t *testing.T) {
	withAccounts(t,
		"root:x:0:0:root:/root:/bin/sh\napp:x:1001:1001:app:/home/app:/bin/sh\n",
		"root:x:0:root\nwheel:x:10:root,app\napp:x:1001:\n")
	cases := []struct {
		spec, fallback string
		want           identity
	}{
		{"", "app", identity{uid: 1001, gid: 1001, groups: []uint32{1001, 10}, name: "app", home: "/home/app"}},
		{"1001", "", identity{uid: 1001, gid: 1001, groups: []uint32{1001, 10}, name: "app", home: "/home/app"}},
		{"app:wheel", "", identity{uid: 1001, gid: 10, groups: []uint32{10}, name: "app", home: "/home/app"}},
		{"root", "app", identity{uid: 0, gid: 0, groups: []uint32{0, 10}, name: "root", home: "/root"}},
	}
	for _, c := range cases {
		got, err := resolveUser(c.spec, c.fallback)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("resolveUser(%q, %q) = %+v, %v; want %+v", c.spec, c.fallback, got, err, c.want)
		}
	}
}

func TestRootRunsWithoutAnAccountDatabase(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("switching users needs root")
	}
	withAccounts(t, "", "")
	c := startAgent(t)
	r := execute(t, c, execRequest{spec: spec{Argv: []string{"sh", "-c", "id -u; id -g; echo $HOME $USER"}, User: "root"}})
	if r.exit.ExitCode != 0 || r.stdout != "0\n0\n/ root\n" {
		t.Fatalf("got %+v", r)
	}
}

func TestAnUnknownDefaultUserIsReported(t *testing.T) {
	withAccounts(t, "", "")
	a := newAgent("ghost", workspaceSetup{}, false)
	c := serveAgent(t, a)
	res, err := c.Get("http://agent/v1/health")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var health map[string]interface{}
	json.NewDecoder(res.Body).Decode(&health)
	if !strings.Contains(health["default_user_error"].(string), `unknown user "ghost"`) {
		t.Fatalf("health: %v", health)
	}
	r := execute(t, c, execRequest{spec: spec{Argv: []string{"true"}}})
	if r.exit.ExitCode != 126 || !strings.Contains(r.stderr, `unknown user "ghost"`) {
		t.Fatalf("got %+v", r)
	}
}

func TestEnterWorkspace(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("chown needs root")
	}
	cwd, _ := os.Getwd()
	t.Cleanup(func() { os.Chdir(cwd) })
	dir := filepath.Join(t.TempDir(), "workspace")
	os.Chdir("/")
	if err := enterWorkspace(dir, identity{uid: 65534, gid: 65534}, false); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(dir)
	if err != nil || info.Sys().(*syscall.Stat_t).Uid != 65534 || info.Mode().Perm() != 0o755 {
		t.Fatalf("made %v, %v", info, err)
	}
	if now, _ := os.Getwd(); now != dir {
		t.Fatalf("working directory %s, want %s", now, dir)
	}

	// An existing directory keeps its owner; an image's own working directory stays.
	os.Chdir(cwd)
	os.Chown(dir, 0, 0)
	if err := enterWorkspace(dir, identity{uid: 65534, gid: 65534}, false); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(dir); info.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Fatal("the owner of an existing workspace changed")
	}
	// Claimed (the default user replaced root): the directory itself changes owner.
	if err := enterWorkspace(dir, identity{uid: 65534, gid: 65534}, true); err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(dir); info.Sys().(*syscall.Stat_t).Uid != 65534 {
		t.Fatal("a claimed workspace kept its owner")
	}
	if now, _ := os.Getwd(); now != cwd {
		t.Fatalf("working directory %s, want %s", now, cwd)
	}
}
