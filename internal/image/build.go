package image

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/svcnet/svcnet/internal/atomicfile"
)

// formatVersion is part of every cache key: bump it when the bytes this
// package writes for the same inputs change.
const formatVersion = "svcnet-image/2"

// Builder builds images into a cache directory, by content: an image whose
// layers' contents, configuration and references are those of one built
// before is not built again.
type Builder struct {
	// CacheDir holds layers, images, root filesystems and compiled programs
	// (DefaultCacheDir when empty).
	CacheDir string
	// Log receives a line per step that takes time (nil: none).
	Log io.Writer
}

// Tarball is a built image: an archive file (writeArchive) and what
// identifies it.
type Tarball struct {
	// Path is the archive (in the cache unless copied).
	Path string `json:"-"`
	// Refs are the references the image is tagged with in the archive.
	Refs []string `json:"refs"`
	// Digest is the image manifest's digest (sha256:...), which a registry
	// and a container runtime's RepoDigests show.
	Digest string `json:"digest"`
	// ID is the configuration's digest, the image ID `ctr images ls` and
	// `crictl images` show.
	ID string `json:"id"`
	// Size is the archive's size in bytes.
	Size int64 `json:"size"`
}

func (b *Builder) dir() (string, error) {
	if b.CacheDir != "" {
		return b.CacheDir, nil
	}
	return DefaultCacheDir()
}

func (b *Builder) logf(format string, args ...any) {
	if b.Log != nil {
		fmt.Fprintf(b.Log, "image: "+format+"\n", args...)
	}
}

// Build returns img as an archive in the cache, building what the cache
// lacks. Its key is the layers' uncompressed contents (read once to hash
// them), the configuration and the references.
func (b *Builder) Build(ctx context.Context, img Image) (Tarball, error) {
	if err := img.validate(); err != nil {
		return Tarball{}, err
	}
	cache, err := b.dir()
	if err != nil {
		return Tarball{}, err
	}
	start := time.Now()
	diffIDs := make([]string, len(img.Layers))
	for i := range img.Layers {
		if err := ctx.Err(); err != nil {
			return Tarball{}, err
		}
		h := sha256.New()
		if err := writeLayer(h, &img.Layers[i]); err != nil {
			return Tarball{}, fmt.Errorf("image %s: layer %d (%s): %w", img.Refs[0], i, img.Layers[i].name(), err)
		}
		diffIDs[i] = hex.EncodeToString(h.Sum(nil))
	}
	cfg := configFile(&img)
	names := make([]string, len(img.Layers))
	for i := range img.Layers {
		names[i] = img.Layers[i].name()
	}
	key := hashJSON(struct {
		Format  string
		Refs    []string
		Config  *v1.ConfigFile
		DiffIDs []string
		History []string
	}{formatVersion, img.Refs, cfg, diffIDs, names})
	base := filepath.Join(cache, "images", key)
	unlock, err := lockFile(base + ".lock")
	if err != nil {
		return Tarball{}, fmt.Errorf("image %s: %w", img.Refs[0], err)
	}
	defer unlock()
	if t, err := readTarball(base); err == nil {
		return t, nil
	}

	// OCI media types throughout (go-containerregistry's empty image has
	// Docker's).
	oci := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	v1img, err := mutate.ConfigFile(oci, cfg)
	if err != nil {
		return Tarball{}, err
	}
	for i := range img.Layers {
		l, err := b.compressedLayer(ctx, cache, &img.Layers[i], diffIDs[i])
		if err != nil {
			return Tarball{}, fmt.Errorf("image %s: layer %d (%s): %w", img.Refs[0], i, img.Layers[i].name(), err)
		}
		v1img, err = mutate.Append(v1img, mutate.Addendum{
			Layer:   l,
			History: v1.History{Created: v1.Time{Time: epoch}, CreatedBy: img.Layers[i].name()},
		})
		if err != nil {
			return Tarball{}, err
		}
	}
	digest, err := v1img.Digest()
	if err != nil {
		return Tarball{}, fmt.Errorf("image %s: %w", img.Refs[0], err)
	}
	id, err := v1img.ConfigName()
	if err != nil {
		return Tarball{}, err
	}
	if err := atomicfile.WriteFunc(base+".tar", 0o644, func(w io.Writer) error {
		return writeArchive(w, v1img, img.Refs)
	}); err != nil {
		return Tarball{}, fmt.Errorf("image %s: %w", img.Refs[0], err)
	}
	fi, err := os.Stat(base + ".tar")
	if err != nil {
		return Tarball{}, err
	}
	t := Tarball{Path: base + ".tar", Refs: img.Refs, Digest: digest.String(), ID: id.String(), Size: fi.Size()}
	meta, _ := json.MarshalIndent(t, "", "  ")
	if err := atomicfile.Write(base+".json", append(meta, '\n'), 0o644); err != nil {
		return Tarball{}, err
	}
	b.logf("built %s (%s, %d MB) in %s", strings.Join(img.Refs, " "), t.Digest, t.Size>>20, time.Since(start).Round(100*time.Millisecond))
	return t, nil
}

// readTarball returns the image cached under base, if complete.
func readTarball(base string) (Tarball, error) {
	b, err := os.ReadFile(base + ".json")
	if err != nil {
		return Tarball{}, err
	}
	var t Tarball
	if err := json.Unmarshal(b, &t); err != nil {
		return Tarball{}, err
	}
	fi, err := os.Stat(base + ".tar")
	if err != nil || fi.Size() != t.Size {
		return Tarball{}, fmt.Errorf("cached image %s: archive missing or of another size", base)
	}
	t.Path = base + ".tar"
	return t, nil
}

// compressedLayer returns the layer whose uncompressed digest is diffID from
// the cache, compressing it there first when missing. The inputs are read
// again for that, and must still hash to diffID.
func (b *Builder) compressedLayer(ctx context.Context, cache string, l *Layer, diffID string) (v1.Layer, error) {
	p := filepath.Join(cache, "layers", diffID+".tar.gz")
	if !exists(p) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		start := time.Now()
		err := atomicfile.WriteFunc(p, 0o644, func(w io.Writer) error {
			zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
			if err != nil {
				return err
			}
			h := sha256.New()
			if err := writeLayer(io.MultiWriter(zw, h), l); err != nil {
				return err
			}
			if err := zw.Close(); err != nil {
				return err
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != diffID {
				return fmt.Errorf("inputs changed while the layer was built (sha256 %s, then %s)", diffID, got)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		b.logf("compressed layer %s (%s) in %s", diffID[:12], l.name(), time.Since(start).Round(100*time.Millisecond))
	}
	return tarball.LayerFromFile(p, tarball.WithMediaType(types.OCILayer))
}

// configFile is img's configuration before its layers are appended: linux on
// this build's architecture, created at the Unix epoch.
func configFile(img *Image) *v1.ConfigFile {
	c := img.Config
	env := slices.Clone(c.Env)
	if !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
		env = append([]string{"PATH=" + DefaultPath}, env...)
	}
	var ports map[string]struct{}
	if len(c.ExposedPorts) > 0 {
		ports = map[string]struct{}{}
		for _, p := range c.ExposedPorts {
			ports[p] = struct{}{}
		}
	}
	cfg := &v1.ConfigFile{
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Created:      v1.Time{Time: epoch},
		Config: v1.Config{
			Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: env, WorkingDir: c.WorkingDir,
			User: c.User, ExposedPorts: ports, Labels: c.Labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	return cfg
}

func gzipReader(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }
