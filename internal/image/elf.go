package image

import (
	"debug/elf"
	"fmt"
)

// checkStatic fails when the program at p needs a dynamic loader (it has an
// ELF interpreter): an image without a C library could not run it.
func checkStatic(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; an image without a C library needs it static (Go: CGO_ENABLED=0)", p)
		}
	}
	return nil
}
