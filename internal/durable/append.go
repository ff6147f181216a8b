package durable

import (
	"io"
	"os"
)

// Append appends data to the end of f and syncs it. On an error it cuts f
// back to its size before, so the next append does not follow a torn
// line; the error names f (the *os.PathError of the step that failed,
// which names it already). Empty data is a no-op.
func Append(f *os.File, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Truncate(size)
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Truncate(size)
		return err
	}
	return nil
}
