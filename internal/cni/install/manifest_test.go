package install

import (
	"slices"
	"strings"
	"testing"
)

const (
	binDir  = "/opt/cni/bin"
	confDir = "/etc/cni/net.d"
)

func sum(c byte) string { return strings.Repeat(string(c), 64) }

func TestParseManifest(t *testing.T) {
	good := `{"kind":"svcnet cni install","files":[{"path":"/opt/cni/bin/svcnet","sha256":"` + sum('a') +
		`"},{"path":"/etc/cni/net.d/10-svcnet.conflist","sha256":"` + sum('b') + `"}]}`
	files, err := parseManifest("m", []byte(good), binDir, confDir)
	if err != nil || len(files) != 2 || files[1].Path != "/etc/cni/net.d/10-svcnet.conflist" {
		t.Fatalf("%+v, %v", files, err)
	}
	for _, tc := range []struct{ name, manifest, want string }{
		{"not JSON", `{`, "manifest m:"},
		{"other kind", `{"kind":"x","files":[]}`, `kind "x"`},
		{"outside the dirs", `{"kind":"svcnet cni install","files":[{"path":"/etc/passwd","sha256":"` + sum('a') + `"}]}`, `"/etc/passwd": not in /opt/cni/bin or /etc/cni/net.d`},
		{"below a dir", `{"kind":"svcnet cni install","files":[{"path":"/opt/cni/bin/x/svcnet","sha256":"` + sum('a') + `"}]}`, "not in"},
		{"relative", `{"kind":"svcnet cni install","files":[{"path":"svcnet","sha256":"` + sum('a') + `"}]}`, "not an absolute canonical path"},
		{"dot dot", `{"kind":"svcnet cni install","files":[{"path":"/opt/cni/bin/../bin/svcnet","sha256":"` + sum('a') + `"}]}`, "not an absolute canonical path"},
		{"itself", `{"kind":"svcnet cni install","files":[{"path":"/etc/cni/net.d/svcnet-cni.installed","sha256":"` + sum('a') + `"}]}`, "the manifest itself"},
		{"bad hash", `{"kind":"svcnet cni install","files":[{"path":"/opt/cni/bin/svcnet","sha256":"` + strings.ToUpper(sum('a')) + `"}]}`, "64 lowercase hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parseManifest("m", []byte(tc.manifest), binDir, confDir); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestMergeAndStale(t *testing.T) {
	bin, lo, conf := binDir+"/svcnet", binDir+"/loopback", confDir+"/10-svcnet.conflist"
	older := []File{{bin, sum('1')}, {lo, sum('1')}, {conf, sum('2')}}
	newer := []File{{bin, sum('3')}, {conf, sum('2')}}
	want := []File{{bin, sum('3')}, {conf, sum('2')}, {bin, sum('1')}, {lo, sum('1')}}
	if got := merge(newer, older); !slices.Equal(got, want) {
		t.Errorf("merge %v, want %v", got, want)
	}
	if got := merge(older, older); !slices.Equal(got, older) {
		t.Errorf("merge of equal lists %v, want %v", got, older)
	}
	if got := stale(older, newer); !slices.Equal(got, []File{{lo, sum('1')}}) {
		t.Errorf("stale %v, want the loopback only", got)
	}
}

// What uninstall removes: a regular file whose content is one recorded for
// its path; nothing else.
func TestPlanRemoval(t *testing.T) {
	bin, lo, conf, other := binDir+"/svcnet", binDir+"/loopback", confDir+"/10-svcnet.conflist", confDir+"/99-x.conflist"
	recorded := []File{{bin, sum('3')}, {lo, sum('3')}, {conf, sum('2')}, {bin, sum('1')}, {other, sum('4')}}
	now := map[string]fileState{
		bin:   {Exists: true, Regular: true, SHA256: sum('1')}, // the older recorded content
		lo:    {Exists: true},                                  // a symlink now
		conf:  {Exists: true, Regular: true, SHA256: sum('9')}, // rewritten by someone
		other: {},                                              // gone
	}
	got := planRemoval(recorded, now)
	want := []verdict{
		{Path: bin, Remove: true},
		{Path: lo, Reason: "no longer a regular file: replaced by someone else"},
		{Path: conf, Reason: "content changed since install (sha256 999999999999): replaced by someone else"},
		{Path: other, Gone: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("plan\n%+v\nwant\n%+v", got, want)
	}
}

func TestLoopbackAction(t *testing.T) {
	lo := binDir + "/loopback"
	src := sum('3')
	recorded := []File{{lo, sum('1')}}
	for _, tc := range []struct {
		name string
		st   fileState
		want bool
		note string
	}{
		{"absent", fileState{}, true, ""},
		{"already ours", fileState{Exists: true, Regular: true, SHA256: src}, true, ""},
		{"an earlier install's", fileState{Exists: true, Regular: true, SHA256: sum('1')}, true, ""},
		{"another plugin's", fileState{Exists: true, Regular: true, SHA256: sum('7')}, false, "another plugin's (sha256 777777777777)"},
		{"a symlink", fileState{Exists: true}, false, "not a regular file"},
	} {
		got, note := loopbackAction(tc.st, lo, recorded, src)
		if got != tc.want || !strings.Contains(note, tc.note) || (tc.note == "") != (note == "") {
			t.Errorf("%s: install %v (%q), want %v (%q)", tc.name, got, note, tc.want, tc.note)
		}
	}
}
