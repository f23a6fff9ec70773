package image

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeArchive writes img as a docker-archive (the format of `docker save`,
// which `ctr images import`, `docker load` and `podman load` read): the
// configuration blob, each layer's compressed blob, and manifest.json naming
// them with refs as RepoTags. go-containerregistry's tarball.MultiRefWrite
// writes the same format but orders RepoTags by map iteration; written here
// in the caller's order, the same image and refs give a byte-identical file.
func writeArchive(w io.Writer, img v1.Image, refs []string) error {
	tw := tar.NewWriter(w)
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	if err := writeBlob(tw, cfgName.String(), int64(len(cfg)), func(w io.Writer) error {
		_, err := w.Write(cfg)
		return err
	}); err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	desc := tarball.Descriptor{Config: cfgName.String(), RepoTags: refs}
	seen := map[v1.Hash]bool{}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		size, err := l.Size()
		if err != nil {
			return err
		}
		file := d.Hex + ".tar.gz"
		desc.Layers = append(desc.Layers, file)
		if seen[d] {
			continue
		}
		seen[d] = true
		if err := writeBlob(tw, file, size, func(w io.Writer) error {
			rc, err := l.Compressed()
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(w, rc)
			return err
		}); err != nil {
			return err
		}
	}
	m, err := json.Marshal(tarball.Manifest{desc})
	if err != nil {
		return err
	}
	if err := writeBlob(tw, "manifest.json", int64(len(m)), func(w io.Writer) error {
		_, err := w.Write(m)
		return err
	}); err != nil {
		return err
	}
	return tw.Close()
}

func writeBlob(tw *tar.Writer, name string, size int64, content func(io.Writer) error) error {
	hdr := &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, ModTime: epoch}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	if err := content(tw); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	return nil
}
