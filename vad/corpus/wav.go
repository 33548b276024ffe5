package corpus

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// WriteWAV writes the clip's audio as far.wav and near.wav (mono 16-bit PCM
// at c.Rate) in the directory dir/Name, creating it as needed, for
// listening to or for feeding to other tools.
func (c Clip) WriteWAV(dir string) error {
	if c.Name == "" || path.IsAbs(c.Name) || strings.Contains(c.Name, "\\") || path.Clean(c.Name) != c.Name ||
		c.Name == ".." || strings.HasPrefix(c.Name, "../") {
		return fmt.Errorf("corpus: WriteWAV: clip name %q is not a relative slash-separated path", c.Name)
	}
	d := filepath.Join(dir, filepath.FromSlash(c.Name))
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("corpus: WriteWAV: %w", err)
	}
	for _, f := range []struct {
		name string
		x    []int16
	}{{"far.wav", c.Far}, {"near.wav", c.Near}} {
		if err := writeWAVFile(filepath.Join(d, f.name), f.x, c.Rate); err != nil {
			return fmt.Errorf("corpus: WriteWAV: %w", err)
		}
	}
	return nil
}
