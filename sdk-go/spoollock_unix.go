//go:build unix

// The spool directory's owner lock: an advisory, non-blocking flock held for the life of the client.
package headwater

import (
	"errors"
	"os"
	"syscall"
)

var errLocked = errors.New("locked")

func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return f, nil
}
