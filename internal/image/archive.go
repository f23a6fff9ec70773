package image

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Annotations of an index entry that name the image, as `docker save` (25 and
// later) and containerd's own export write them: containerd names the
// imported image after the first, OCI tools take the tag from the second.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// writeArchive writes img as an archive that is at once an OCI image layout
// (oci-layout, index.json, blobs/sha256/...) and a docker-archive
// (manifest.json naming the same blobs), the format of `docker save` since
// Docker 25. `ctr images import` reads the OCI layout, so the imported image
// keeps this manifest and its digest (from a plain docker-archive containerd
// writes a manifest of its own, with another digest); `docker load`,
// `podman load` and go-containerregistry's tarball package read
// manifest.json. Blobs are written once, refs in the caller's order (index
// entries each name one), so the same image and refs give a byte-identical
// file; tarball.MultiRefWrite would order refs by map iteration.
func writeArchive(w io.Writer, img v1.Image, refs []string) error {
	tw := tar.NewWriter(w)
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	if err := writeEntry(tw, "blobs/", nil); err != nil {
		return err
	}
	if err := writeEntry(tw, "blobs/sha256/", nil); err != nil {
		return err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if err := writeEntry(tw, blob(cfgName), cfg); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	desc := tarball.Descriptor{Config: blob(cfgName), RepoTags: refs}
	seen := map[v1.Hash]bool{}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		desc.Layers = append(desc.Layers, blob(d))
		if seen[d] {
			continue
		}
		seen[d] = true
		if err := writeLayerBlob(tw, blob(d), l); err != nil {
			return err
		}
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	mediaType, err := img.MediaType()
	if err != nil {
		return err
	}
	if err := writeEntry(tw, blob(digest), manifest); err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	index := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex}
	for _, r := range refs {
		tag, err := parseRef(r)
		if err != nil {
			return err
		}
		index.Manifests = append(index.Manifests, v1.Descriptor{
			MediaType: mediaType, Digest: digest, Size: int64(len(manifest)),
			Platform:    &v1.Platform{OS: cf.OS, Architecture: cf.Architecture},
			Annotations: map[string]string{annotationImageName: r, annotationRefName: tag.TagStr()},
		})
	}
	for _, f := range []struct {
		name string
		v    any
	}{
		{"index.json", index},
		{"manifest.json", tarball.Manifest{desc}},
		{"oci-layout", struct {
			Version string `json:"imageLayoutVersion"`
		}{"1.0.0"}},
	} {
		b, err := json.Marshal(f.v)
		if err != nil {
			return err
		}
		if err := writeEntry(tw, f.name, b); err != nil {
			return err
		}
	}
	return tw.Close()
}

// writeEntry writes a file (or, for a name ending in "/", a directory) of
// the archive.
func writeEntry(tw *tar.Writer, name string, b []byte) error {
	hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b)), ModTime: epoch}
	if name[len(name)-1] == '/' {
		hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	if _, err := tw.Write(b); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	return nil
}

// writeLayerBlob streams layer l's compressed blob into the archive.
func writeLayerBlob(tw *tar.Writer, name string, l v1.Layer) error {
	size, err := l.Size()
	if err != nil {
		return err
	}
	hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := io.Copy(tw, rc); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	return nil
}
