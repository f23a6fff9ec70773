// Package testbin builds the svcnet binary for tests that run it as a process
// (the kernel, e2e and CNI tiers), the same way for all of them.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/svcnet/svcnet/internal/process"
)

// ModuleRoot walks up from the working directory to the directory of go.mod.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build compiles ./cmd/svcnet of this module into out.
func Build(out string) error { return build(out, nil) }

// BuildStatic compiles ./cmd/svcnet into out as `make image` does for the
// container image: CGO_ENABLED=0, so it runs without a C library.
func BuildStatic(out string) error { return build(out, []string{"CGO_ENABLED=0"}) }

func build(out string, env []string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.Command("go", "build", "-o", out, "./cmd/svcnet")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%sgo build ./cmd/svcnet: %w\n%s", strings.Join(append(env, ""), " "), err, strings.TrimSpace(string(b)))
	}
	return nil
}

// FromEnv returns the svcnet binary to run: the file named by the environment
// variable env when it is set (it must be an executable file), else
// ./cmd/svcnet of this module built into dir.
func FromEnv(env, dir string) (string, error) {
	if env != "" {
		if p := os.Getenv(env); p != "" {
			return Executable(p)
		}
	}
	out := filepath.Join(dir, "svcnet")
	if err := Build(out); err != nil {
		return "", fmt.Errorf("svcnet binary: %w", err)
	}
	return out, nil
}

// Executable returns path when it names an executable file, else an error
// saying why not.
func Executable(path string) (string, error) {
	if err := process.CheckExecutable(path); err != nil {
		return "", err
	}
	return path, nil
}
