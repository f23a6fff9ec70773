package iptables

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/svcnet/svcnet/internal/ipfamily"
)

// Runner restores and saves iptables tables of one network namespace.
type Runner interface {
	// Restore applies restore input (one or more "*table ... COMMIT"
	// blocks) with --noflush: declared chains are flushed, the others kept.
	Restore(ctx context.Context, f ipfamily.Family, input []byte) error
	// Save returns the iptables-save text of one table.
	Save(ctx context.Context, f ipfamily.Family, table string) ([]byte, error)
}

// Variant is an iptables implementation: which programs Exec runs.
type Variant string

const (
	// NFT is iptables-nft: rules in nf_tables tables "ip nat", "ip filter"...
	NFT Variant = "nft"
	// Legacy is iptables-legacy: the x_tables kernel interface.
	Legacy Variant = "legacy"
)

// CommandFunc makes the command for argv (argv[0] the program): by default
// exec.CommandContext in the caller's namespace, in tests a namespace's
// netns.NS.CommandContext.
type CommandFunc func(ctx context.Context, argv ...string) *exec.Cmd

// Exec is the Runner that runs iptables-{nft,legacy}-restore and -save.
type Exec struct {
	Variant Variant
	// Command defaults to exec.CommandContext (the caller's namespace).
	Command CommandFunc
}

var _ Runner = (*Exec)(nil)

// program returns the name of tool ("restore" or "save") for family f.
func (e *Exec) program(f ipfamily.Family, tool string) string {
	base := "iptables"
	if f == ipfamily.IPv6 {
		base = "ip6tables"
	}
	v := e.Variant
	if v == "" {
		v = NFT
	}
	return fmt.Sprintf("%s-%s-%s", base, v, tool)
}

func (e *Exec) command(ctx context.Context, argv ...string) *exec.Cmd {
	if e.Command != nil {
		return e.Command(ctx, argv...)
	}
	return exec.CommandContext(ctx, argv[0], argv[1:]...)
}

// Restore runs iptables-restore --noflush with input on stdin.
func (e *Exec) Restore(ctx context.Context, f ipfamily.Family, input []byte) error {
	name := e.program(f, "restore")
	cmd := e.command(ctx, name, "--noflush", "--wait")
	cmd.Stdin = bytes.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Save runs iptables-save -t table.
func (e *Exec) Save(ctx context.Context, f ipfamily.Family, table string) ([]byte, error) {
	name := e.program(f, "save")
	var stderr bytes.Buffer
	cmd := e.command(ctx, name, "-t", table)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s -t %s: %w: %s", name, table, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
