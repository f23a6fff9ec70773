package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// EnvCacheDir names the cache directory when set; otherwise it is
// ~/.cache/svcnet/images.
const EnvCacheDir = "SVCNET_IMAGE_CACHE"

// DefaultCacheDir returns $SVCNET_IMAGE_CACHE, else ~/.cache/svcnet/images.
func DefaultCacheDir() (string, error) {
	if d := os.Getenv(EnvCacheDir); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("image cache: %w (set %s)", err, EnvCacheDir)
	}
	return filepath.Join(home, ".cache", "svcnet", "images"), nil
}

// hashJSON is the hex SHA-256 of v's JSON encoding: the cache key of a
// build's inputs.
func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("image: cache key: %v", err)) // plain data only
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// lockFile takes an exclusive flock on path (created if missing) and returns
// its release; builds of one cache entry by several processes wait for each
// other, and the lock goes with the process if it dies.
func lockFile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
