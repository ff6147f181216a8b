// Command modproxy writes a file-based Go module proxy (GOPROXY=file://DIR)
// holding the modules of this repository at one version, made from the
// working tree as `go mod download` would serve them from a tag: each
// module's files below its directory, without its nested modules, zipped
// under module@version/. scripts/release-check.sh builds every nested
// module against it with GOWORK=off, as a user who ran `go get` would.
//
// Usage: go run ./internal/cmd/modproxy -out DIR -version vX.Y.Z MODDIR...
package main

import (
	"archive/zip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

func main() {
	out := flag.String("out", "", "the proxy directory to write")
	version := flag.String("version", "", "the version every module is published at, e.g. v0.1.0")
	flag.Parse()
	if err := run(*out, *version, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

var semver = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

func run(out, version string, dirs []string) error {
	switch {
	case out == "":
		return errors.New("-out is required")
	case !semver.MatchString(version):
		return fmt.Errorf("-version must be vMAJOR.MINOR.PATCH (got %q)", version)
	case len(dirs) == 0:
		return errors.New("name at least one module directory")
	}
	for _, dir := range dirs {
		if err := publish(out, version, dir); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
	}
	return nil
}

// publish writes the module in dir at version into the proxy out.
func publish(out, version, dir string) error {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return err
	}
	path := modulePath(gomod)
	if path == "" {
		return errors.New("go.mod names no module")
	}
	at := filepath.Join(out, filepath.FromSlash(escape(path)), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	info, _ := json.Marshal(struct{ Version, Time string }{version, time.Now().UTC().Format(time.RFC3339)})
	for name, data := range map[string][]byte{version + ".info": info, version + ".mod": gomod} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(at, "list"), []byte(version+"\n"), 0o644); err != nil {
		return err
	}
	return zipModule(filepath.Join(at, version+".zip"), dir, path+"@"+version)
}

// zipModule zips the files of the module in dir under prefix/, leaving
// out nested modules, vendor, hidden and _-prefixed directories, and
// anything but regular files, as the go command's module zips do.
func zipModule(name, dir, prefix string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	zw := zip.NewWriter(f)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			if strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "vendor" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // a nested module is its own zip
			}
			return nil
		}
		if !d.Type().IsRegular() || strings.HasPrefix(d.Name(), ".") {
			return nil
		}
		w, err := zw.Create(prefix + "/" + filepath.ToSlash(rel))
		if err != nil {
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(w, src)
		return err
	})
	if cerr := zw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// modulePath returns the module path a go.mod declares.
func modulePath(gomod []byte) string {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`)
		}
	}
	return ""
}

// escape is a module path as the proxy protocol spells it: each upper-case
// letter as '!' and its lower case.
func escape(path string) string {
	var b strings.Builder
	for _, r := range path {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
