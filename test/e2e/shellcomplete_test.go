package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/svcnet/svcnet/internal/netns"
)

// shellCompletes runs the completion of line (ending where the user
// pressed TAB) in shell (bash, fish or zsh) with svcnet's own completion
// script loaded (`svcnet completion SHELL`), in network namespace ns, and
// fails t unless every one of want is offered (for bash and fish, exactly
// want). bash runs its completion function as readline would
// (COMP_WORDS, COMP_CWORD) after bash-completion, as a user's bash loads
// it; fish answers `complete -C`; zsh completes in a pseudo-terminal (zpty),
// TAB pressed twice (the first may only insert a common prefix), and its
// listing is read back.
func shellCompletes(t *testing.T, ctx context.Context, ns, shell, line string, want ...string) {
	t.Helper()
	if strings.Contains(line, "'") {
		t.Fatalf("completing %q: a line with a quote is not quoted for fish here", line)
	}
	bin := t.TempDir()
	if err := os.Symlink(svcnetBin, filepath.Join(bin, "svcnet")); err != nil {
		t.Fatal(err)
	}
	var script string
	switch shell {
	case "bash":
		script = `source /usr/share/bash-completion/bash_completion
source <(svcnet completion bash)
line=` + shellQuote(line) + `
COMP_LINE=$line; COMP_POINT=${#line}
read -ra COMP_WORDS <<< "$line"; [[ $line == *' ' ]] && COMP_WORDS+=('')
COMP_CWORD=$((${#COMP_WORDS[@]}-1))
__start_svcnet
printf '%s\n' "${COMPREPLY[@]}"`
	case "fish":
		script = `svcnet completion fish | source; complete -C ` + shellQuote(line)
	case "zsh":
		checks := ""
		for _, w := range want {
			checks += ` && [[ $out == *` + shellQuote(w) + `* ]]`
		}
		script = `zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z 'PS1=">"; autoload -U compinit; compinit -u; source <(svcnet completion zsh)'
zpty -w -n z ` + shellQuote(line) + `$'\t'
sleep 0.5
zpty -w -n z $'\t'
out=
for i in {1..100}; do
  zpty -r -t z chunk && out+=$chunk
  true` + checks + ` && break
  sleep 0.1
done
zpty -d z
print -r -- "$out"`
	default:
		t.Fatalf("shell %q", shell)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	args := []string{shell, "-c", script}
	if shell == "zsh" {
		args = []string{"zsh", "-f", "-c", script}
	}
	cmd := netns.CommandNetIn(ctx, ns, args...)
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "TERM=dumb")
	// Outside readline, bash's compopt complains on stderr; the candidates
	// are stdout.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s completing %q: %v\n%s%s", shell, line, err, out, stderr.String())
	}
	if shell == "zsh" {
		for _, w := range want {
			if !strings.Contains(string(out), w) {
				t.Errorf("zsh completing %q offers no %q:\n%q", line, w, out)
			}
		}
		return
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if c, _, _ := strings.Cut(l, "\t"); c != "" {
			got = append(got, strings.TrimSpace(c))
		}
	}
	slices.Sort(got)
	sorted := slices.Sorted(slices.Values(want))
	if !slices.Equal(got, sorted) {
		t.Errorf("%s completing %q offers %q, want %q", shell, line, got, sorted)
	}
}

// shellQuote quotes s for a POSIX shell and zsh (and, without a quote in
// it, for fish).
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
