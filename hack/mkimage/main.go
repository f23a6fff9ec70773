// Command mkimage builds container images without Docker (internal/image):
//
//	mkimage svcnet --binary bin/svcnet --tag TAG --out bin/svcnet-image.tar [--import ADDRESS]
//	mkimage test-images [--out DIR] [--import ADDRESS]
//
// svcnet: svcnet's image from a static binary, tagged REPOSITORY:TAG and
// REPOSITORY:latest (`make image` runs it). test-images: the images the node
// tier imports into each node (pause, agnhost, the Debian-based test images,
// kube-proxy, CoreDNS), as the e2e framework names them. Each image is built
// into the cache (~/.cache/svcnet/images, or $SVCNET_IMAGE_CACHE) unless it is
// there already, copied to --out, and with --import loaded into the containerd
// listening on ADDRESS (namespace k8s.io) with ctr. A line per image gives its
// references, digest, ID and size.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/svcnet/svcnet/internal/atomicfile"
	"github.com/svcnet/svcnet/internal/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: mkimage svcnet|test-images [flags]")
	}
	fl := flag.NewFlagSet("mkimage "+args[0], flag.ContinueOnError)
	cacheDir := fl.String("cache", "", "cache directory (default $"+image.EnvCacheDir+" or ~/.cache/svcnet/images)")
	importAddr := fl.String("import", "", "also import into the containerd at this socket address (namespace "+image.CRINamespace+")")
	ctr := fl.String("ctr", "ctr", "the ctr program for --import")
	bld := &image.Builder{Log: os.Stderr}
	var build func() ([]image.Tarball, error)
	var out *string
	switch args[0] {
	case "svcnet":
		binary := fl.String("binary", "bin/svcnet", "the static svcnet binary")
		repo := fl.String("repository", image.SvcnetRepository, "image repository")
		tag := fl.String("tag", "", "image tag, e.g. from git describe (required)")
		out = fl.String("out", "bin/svcnet-image.tar", "write the image archive here")
		build = func() ([]image.Tarball, error) {
			if *tag == "" {
				return nil, fmt.Errorf("svcnet: --tag is required")
			}
			refs := []string{*repo + ":" + *tag}
			if *tag != "latest" {
				refs = append(refs, *repo+":latest")
			}
			img, err := image.Svcnet(*binary, refs...)
			if err != nil {
				return nil, err
			}
			tb, err := bld.Build(ctx, img)
			if err != nil {
				return nil, err
			}
			if err := copyFile(tb.Path, *out); err != nil {
				return nil, err
			}
			tb.Path = *out
			return []image.Tarball{tb}, nil
		}
	case "test-images":
		out = fl.String("out", "", "copy the archives into this directory")
		build = func() ([]image.Tarball, error) {
			tbs, err := image.BuildTestImages(ctx, image.TestImageOptions{Builder: bld})
			if err != nil || *out == "" {
				return tbs, err
			}
			for i, tb := range tbs {
				dst := filepath.Join(*out, archiveName(tb.Refs[0]))
				if err := copyFile(tb.Path, dst); err != nil {
					return nil, err
				}
				tbs[i].Path = dst
			}
			return tbs, nil
		}
	default:
		return fmt.Errorf("unknown mode %q: want svcnet or test-images", args[0])
	}
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("%s: unexpected arguments %q", args[0], fl.Args())
	}
	bld.CacheDir = *cacheDir
	tbs, err := build()
	if err != nil {
		return err
	}
	for _, tb := range tbs {
		fmt.Printf("%s %s id %s %.1f MB %s\n", strings.Join(tb.Refs, " "), tb.Digest, tb.ID, float64(tb.Size)/(1<<20), tb.Path)
	}
	if *importAddr != "" {
		paths := make([]string, len(tbs))
		for i, tb := range tbs {
			paths[i] = tb.Path
		}
		if err := image.Import(ctx, *ctr, *importAddr, paths...); err != nil {
			return err
		}
		fmt.Printf("imported %d image(s) into %s (namespace %s)\n", len(tbs), *importAddr, image.CRINamespace)
	}
	return nil
}

// archiveName is a file name for the archive of ref:
// registry.k8s.io/pause:3.10.2 gives registry.k8s.io_pause_3.10.2.tar.
func archiveName(ref string) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(ref) + ".tar"
}

// copyFile copies src to dst atomically.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return atomicfile.WriteFunc(dst, 0o644, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}
