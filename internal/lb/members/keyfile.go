package members

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// DefaultKeyFilePoll is how often WatchKeyFile reads the key file again (a
// change takes effect within two polls). The
// file is polled rather than watched with inotify: a Secret volume replaces
// its files by swapping a symlink in their directory, which a watch on the
// file misses, and reading a file of a few lines costs microseconds.
const DefaultKeyFilePoll = 2 * time.Second

// maxKeyFileSize bounds a key file: MaxKeys keys of MaxKeyLen bytes in base64
// fit in well under it.
const maxKeyFileSize = 64 << 10

// ReadKeyFile reads and parses a key file (the format of ParseKeys). Errors
// name the file and the line, never a key.
func ReadKeyFile(path string) (*Keyring, error) {
	b, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return parseKeyFile(path, b)
}

// readKeyFile returns the content of a key file, at most maxKeyFileSize bytes.
func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("heartbeat key file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("heartbeat key file %s: %w", path, err)
	}
	if len(b) > maxKeyFileSize {
		return nil, fmt.Errorf("heartbeat key file %s: larger than %d bytes", path, maxKeyFileSize)
	}
	return b, nil
}

func parseKeyFile(path string, b []byte) (*Keyring, error) {
	keys, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("heartbeat key file %s: %w", path, err)
	}
	return keys, nil
}

// WatchKeyFile reads path every poll (zero means DefaultKeyFilePoll) until ctx
// ends and, whenever its keys differ from m's, gives them to m (SetKeys), with
// a log line naming the keys by their IDs. A content counts once it reads the
// same twice in a row: a file caught half written (truncated, then written,
// as by a shell redirection) is never taken for a key. A file that cannot be
// read or parsed changes nothing: m keeps its keys, and the error is logged
// once while it stays the same. It returns nil when ctx ends, and an error at
// once for a Members made Insecure.
func (m *Members) WatchKeyFile(ctx context.Context, path string, poll time.Duration) error {
	if m.cfg.Insecure {
		return errors.New("members: insecure: no key file to watch")
	}
	if poll <= 0 {
		poll = DefaultKeyFilePoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	w := &keyWatch{m: m, path: path}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.poll()
		}
	}
}

// keyWatch is WatchKeyFile's state between polls.
type keyWatch struct {
	m       *Members
	path    string
	prev    []byte // the content read last; nil after a failed read
	lastErr string // the error logged last; "" once the file works again
}

// poll reads the file once and applies its keys if the content held still
// since the last poll.
func (w *keyWatch) poll() {
	b, err := readKeyFile(w.path)
	if err != nil {
		w.prev = nil
		w.report(err)
		return
	}
	if w.prev == nil || !bytes.Equal(b, w.prev) {
		w.prev = b // changed since the last read: wait until it holds still
		return
	}
	keys, err := parseKeyFile(w.path, b)
	if err != nil {
		w.report(err)
		return
	}
	if w.lastErr != "" {
		w.m.log.Info("heartbeat key file readable again", "file", w.path)
		w.lastErr = ""
	}
	if old := w.m.keys.Load(); !keys.Equal(old) {
		w.m.keys.Store(keys)
		ids := keys.IDs()
		w.m.log.Info("heartbeat keys reloaded", "file", w.path, "signing", ids[0], "keys", ids, "was", old.IDs())
	}
}

// report logs err unless it is the one logged last.
func (w *keyWatch) report(err error) {
	if err.Error() != w.lastErr {
		w.m.log.Error(err, "heartbeat keys not reloaded; the keys in use stay", "file", w.path, "keys", w.m.keys.Load().IDs())
		w.lastErr = err.Error()
	}
}
