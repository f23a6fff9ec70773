package diagram

import (
	"context"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestSVGRendersToPNG renders each fixture with rsvg-convert (Debian's
// librsvg2-bin) and looks at the pixels: the image is as large as the SVG
// says, is not blank, shows the rewrite highlight when there are rewrites
// and the failure's red when the packet did not get through.
func TestSVGRendersToPNG(t *testing.T) {
	bin, err := exec.LookPath("rsvg-convert")
	if err != nil {
		if os.Getenv("SVCNET_REQUIRE_ROOT") != "" {
			t.Fatalf("rsvg-convert (package librsvg2-bin) is required: %v", err)
		}
		t.Skipf("rsvg-convert (package librsvg2-bin) not installed: %v", err)
	}
	for name, tr := range fixtures() {
		t.Run(name, func(t *testing.T) {
			svg := SVG(tr)
			doc := parseSVG(t, svg)
			dir := t.TempDir()
			in, out := filepath.Join(dir, name+".svg"), filepath.Join(dir, name+".png")
			if err := os.WriteFile(in, svg, 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if msg, err := exec.CommandContext(ctx, bin, "--format=png", "-o", out, in).CombinedOutput(); err != nil {
				t.Fatalf("rsvg-convert %s: %v: %s", in, err, msg)
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("decode %s: %v", out, err)
			}
			b := img.Bounds()
			if b.Dx() < doc.width || b.Dy() < doc.height {
				t.Fatalf("png is %dx%d, the svg says %dx%d", b.Dx(), b.Dy(), doc.width, doc.height)
			}
			white := color.NRGBA{255, 255, 255, 255}
			hl, fail := hexColor(t, rewriteFill), hexColor(t, failLook.fill)
			inked, highlight, red := 0, 0, 0
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					c := color.NRGBAModel.Convert(img.At(x, y)).(color.NRGBA)
					if c != white {
						inked++
					}
					switch c {
					case hl:
						highlight++
					case fail:
						red++
					}
				}
			}
			total := b.Dx() * b.Dy()
			t.Logf("%dx%d: %d%% inked, %d highlight pixels", b.Dx(), b.Dy(), 100*inked/total, highlight)
			if inked*10 < total { // boxes, lines and text cover well over a tenth
				t.Errorf("only %d of %d pixels are not background: blank?", inked, total)
			}
			if wantHL := tr.Summary.Rewrites > 0; wantHL != (highlight > 1000) {
				t.Errorf("%d pixels in the rewrite highlight %s, with %d rewrites", highlight, rewriteFill, tr.Summary.Rewrites)
			}
			if failed(tr.Verdict) != (red > 1000) {
				t.Errorf("%d pixels in the failure's red %s, verdict %s", red, failLook.fill, tr.Verdict.Kind)
			}
		})
	}
}

// hexColor parses "#rrggbb".
func hexColor(t *testing.T, s string) color.NRGBA {
	t.Helper()
	var c color.NRGBA
	c.A = 255
	if _, err := fmt.Sscanf(s, "#%02x%02x%02x", &c.R, &c.G, &c.B); err != nil {
		t.Fatalf("color %q: %v", s, err)
	}
	return c
}
