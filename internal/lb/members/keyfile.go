package members

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// DefaultKeyFilePoll is how often WatchKeyFile reads the key file again. The
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
	keys, err := ParseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("heartbeat key file %s: %w", path, err)
	}
	return keys, nil
}

// WatchKeyFile reads path every poll (zero means DefaultKeyFilePoll) until ctx
// ends, and whenever its keys differ from m's gives them to m (SetKeys), with
// a log line naming the keys by their IDs. A file that cannot be read or
// parsed changes nothing: m keeps its keys, and the error is logged once
// while it stays the same. It returns nil when ctx ends, and an error at once
// for a Members made Insecure.
func (m *Members) WatchKeyFile(ctx context.Context, path string, poll time.Duration) error {
	if m.cfg.Insecure {
		return errors.New("members: insecure: no key file to watch")
	}
	if poll <= 0 {
		poll = DefaultKeyFilePoll
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	lastErr := ""
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		keys, err := ReadKeyFile(path)
		if err != nil {
			if err.Error() != lastErr {
				m.log.Error(err, "heartbeat keys not reloaded; the keys in use stay", "file", path, "keys", m.keys.Load().IDs())
				lastErr = err.Error()
			}
			continue
		}
		if lastErr != "" {
			m.log.Info("heartbeat key file readable again", "file", path)
			lastErr = ""
		}
		if old := m.keys.Load(); !keys.Equal(old) {
			if err := m.SetKeys(keys); err != nil {
				return err
			}
			ids := keys.IDs()
			m.log.Info("heartbeat keys reloaded", "file", path, "signing", ids[0], "keys", ids, "was", old.IDs())
		}
	}
}
