package install

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
)

// ManifestName is the file in the CNI conf dir that records what install
// wrote. Its name has none of the extensions a runtime reads as a network
// configuration (.conf, .conflist, .json), so no runtime takes it for one.
const ManifestName = "svcnet-cni.installed"

// manifestKind marks a manifest as the installer's.
const manifestKind = "svcnet cni install"

// File is one file the installer wrote: its path and the SHA-256 of the
// content it wrote there.
type File struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// Manifest records the files of an install. While an install replaces files,
// a path may be listed with its old and its new hash (either content is the
// installer's); afterwards each path is listed once.
type Manifest struct {
	Kind  string `json:"kind"`
	Files []File `json:"files"`
}

// encodeManifest renders m with one file a line, deterministically.
func encodeManifest(files []File) []byte {
	b, err := json.MarshalIndent(Manifest{Kind: manifestKind, Files: files}, "", "  ")
	if err != nil {
		panic(err) // strings only
	}
	return append(b, '\n')
}

// parseManifest decodes the manifest at path (its content b) and checks every
// entry: an absolute, canonical path directly in binDir or confDir, not the
// manifest itself, and a SHA-256 in hex. A manifest that breaks a rule is
// refused as a whole, naming the file and the entry: uninstall removes only
// what a well-formed record names.
func parseManifest(path string, b []byte, binDir, confDir string) ([]File, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	if m.Kind != manifestKind {
		return nil, fmt.Errorf("manifest %s: kind %q, want %q", path, m.Kind, manifestKind)
	}
	for i, f := range m.Files {
		dir := filepath.Dir(f.Path)
		switch {
		case !filepath.IsAbs(f.Path) || filepath.Clean(f.Path) != f.Path:
			return nil, fmt.Errorf("manifest %s: files[%d] %q: not an absolute canonical path", path, i, f.Path)
		case dir != binDir && dir != confDir:
			return nil, fmt.Errorf("manifest %s: files[%d] %q: not in %s or %s", path, i, f.Path, binDir, confDir)
		case filepath.Base(f.Path) == ManifestName:
			return nil, fmt.Errorf("manifest %s: files[%d] %q: the manifest itself", path, i, f.Path)
		case !isSHA256(f.SHA256):
			return nil, fmt.Errorf("manifest %s: files[%d] %q: sha256 %q is not 64 lowercase hex digits", path, i, f.Path, f.SHA256)
		}
	}
	return m.Files, nil
}

func isSHA256(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32 && hex.EncodeToString(b) == s
}

// merge returns newer followed by the entries of older that newer lacks
// (path and hash), without duplicates: the record to keep while an install
// replaces older's files by newer's, so either content counts as the
// installer's should it stop half way.
func merge(newer, older []File) []File {
	var out []File
	for _, f := range append(slices.Clone(newer), older...) {
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// stale returns the entries of older whose path newer does not list: files an
// earlier install wrote that this one no longer writes (a loopback that is now
// another plugin's, a conflist under another name).
func stale(older, newer []File) []File {
	var out []File
	for _, f := range older {
		if !slices.ContainsFunc(newer, func(n File) bool { return n.Path == f.Path }) {
			out = append(out, f)
		}
	}
	return out
}

// fileState is what is at a path now.
type fileState struct {
	Exists  bool
	Regular bool   // a regular file (not a symlink, directory, device...)
	SHA256  string // of a regular file's content
}

// verdict is what uninstall does with one recorded path.
type verdict struct {
	Path   string
	Remove bool
	// Reason says why a path stays ("" when it is removed or already gone).
	Reason string
	Gone   bool
}

// planRemoval decides, for each distinct path of recorded (in order), from
// what is there now: remove it when it is a regular file whose content has a
// hash recorded for that path (the installer's content); leave it, with the
// reason, when it is anything else (replaced by someone else since, or never
// a file the installer wrote); nothing when it is gone.
func planRemoval(recorded []File, now map[string]fileState) []verdict {
	var out []verdict
	seen := map[string]bool{}
	for _, f := range recorded {
		if seen[f.Path] {
			continue
		}
		seen[f.Path] = true
		st := now[f.Path]
		switch {
		case !st.Exists:
			out = append(out, verdict{Path: f.Path, Gone: true})
		case !st.Regular:
			out = append(out, verdict{Path: f.Path, Reason: "no longer a regular file: replaced by someone else"})
		case slices.Contains(hashesOf(recorded, f.Path), st.SHA256):
			out = append(out, verdict{Path: f.Path, Remove: true})
		default:
			out = append(out, verdict{Path: f.Path, Reason: "content changed since install (sha256 " + short(st.SHA256) + "): replaced by someone else"})
		}
	}
	return out
}

func hashesOf(files []File, path string) []string {
	var out []string
	for _, f := range files {
		if f.Path == path {
			out = append(out, f.SHA256)
		}
	}
	return out
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// loopbackAction decides whether the installer may write loopback at a path
// where st is now: when nothing is there, when the file already has the
// content to install (srcHash), or when it has content the installer
// recorded for that path (an earlier install's). Anything else (the reference
// plugin from a distribution's package, another CNI's) is left alone, and the
// reason says so.
func loopbackAction(st fileState, path string, recorded []File, srcHash string) (install bool, reason string) {
	switch {
	case !st.Exists:
		return true, ""
	case !st.Regular:
		return false, path + " is not a regular file: another install's; left as it is"
	case st.SHA256 == srcHash, slices.Contains(hashesOf(recorded, path), st.SHA256):
		return true, ""
	}
	return false, path + " is another plugin's (sha256 " + short(st.SHA256) + "); left as it is, it serves runtimes equally"
}
