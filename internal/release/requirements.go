package main

import (
	"fmt"

	"golang.org/x/mod/modfile"
)

// SetSiblingVersions returns the go.mod text data (of file name) with every
// requirement on a module of siblings set to version, and whether that
// changed anything. Requirements on other modules, and the absence of a
// requirement, are left as they are.
func SetSiblingVersions(name string, data []byte, siblings map[string]bool, version string) ([]byte, bool, error) {
	f, err := modfile.Parse(name, data, nil)
	if err != nil {
		return nil, false, fmt.Errorf("set sibling versions: %w", err)
	}
	var stale []string
	for _, r := range f.Require {
		if siblings[r.Mod.Path] && r.Mod.Version != version {
			stale = append(stale, r.Mod.Path)
		}
	}
	if len(stale) == 0 {
		return data, false, nil
	}
	for _, p := range stale {
		if err := f.AddRequire(p, version); err != nil {
			return nil, false, fmt.Errorf("set sibling versions: %s: %w", name, err)
		}
	}
	f.Cleanup()
	out, err := f.Format()
	if err != nil {
		return nil, false, fmt.Errorf("set sibling versions: %s: %w", name, err)
	}
	return out, true, nil
}
