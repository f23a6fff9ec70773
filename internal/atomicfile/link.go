package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Link makes path a hard link to the file oldname (same file system): a link
// under a temporary name in path's directory, then rename, so path is always
// either what it was or oldname's file.
func Link(oldname, path string) error {
	for range 8 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return fmt.Errorf("link %s: %w", path, err)
		}
		tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"."+hex.EncodeToString(b[:])+".tmp")
		err := os.Link(oldname, tmp)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			err = os.Rename(tmp, path)
			if err != nil {
				os.Remove(tmp)
			}
		}
		if err != nil {
			return fmt.Errorf("link %s to %s: %w", path, oldname, err)
		}
		return nil
	}
	return fmt.Errorf("link %s: no free temporary name", path)
}
