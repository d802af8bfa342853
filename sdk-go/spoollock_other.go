//go:build !unix

// The spool directory's owner lock where flock does not exist: an exclusive-create lock is not crash-safe, so
// only the file is opened (one client per directory is then the caller's duty).
package headwater

import (
	"errors"
	"os"
)

var errLocked = errors.New("locked")

func lockDir(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
}
