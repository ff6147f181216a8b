package forage_test

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// snippetImports are the packages a README snippet may use without
// importing them: the test adds the import of each one it names.
var snippetImports = map[string]string{
	"admin": "github.com/forage-go/forage/admin", "forage": "github.com/forage-go/forage",
	"aimd": "github.com/forage-go/forage/aimd", "breaker": "github.com/forage-go/forage/breaker",
	"budget": "github.com/forage-go/forage/budget", "checkpoint": "github.com/forage-go/forage/checkpoint",
	"gcra": "github.com/forage-go/forage/gcra", "klines": "github.com/forage-go/forage/klines",
	"providertest": "github.com/forage-go/forage/providertest", "retry": "github.com/forage-go/forage/retry",
	"schedule": "github.com/forage-go/forage/schedule", "slice": "github.com/forage-go/forage/slice",
	"context": "context", "errors": "errors", "fmt": "fmt", "http": "net/http", "io": "io",
	"log": "log", "os": "os", "slog": "log/slog", "atomic": "sync/atomic", "sync": "sync", "time": "time",
}

// TestReadmeSnippetsCompile builds every ```go block of README.md, so the
// README cannot show code that does not compile. A block that is a whole
// file (it starts with a package clause) is built as it is; any other gets
// a package clause and the imports of the packages it names
// (snippetImports), and a block of statements is the body of a function.
// Each block is its own package, laid over the module with go build
// -overlay: nothing is written into the tree, and the module's go.sum
// serves, so no download is needed.
func TestReadmeSnippetsCompile(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block: the test would prove nothing")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build the snippets with: %v", err)
	}
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	replace := map[string]string{}
	var pkgs []string
	for i, b := range blocks {
		src := snippetFile(fmt.Sprintf("snippet%d", i), b)
		file := filepath.Join(tmp, fmt.Sprintf("snippet%d.go", i))
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		dir := fmt.Sprintf("internal/readmesnippets/snippet%d", i)
		replace[filepath.Join(root, dir, "snippet.go")] = file
		pkgs = append(pkgs, "./"+dir)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	overlayFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goTool, append([]string{"build", "-overlay", overlayFile}, pkgs...)...)
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("README snippets do not compile:\n%s", out)
	}
}

// block is one ```go block of a Markdown file and the line it starts on.
type block struct {
	text string
	line int
}

// goBlocks returns the ```go blocks of a Markdown text.
func goBlocks(md string) []block {
	var out []block
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		start := i + 1
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
		}
		out = append(out, block{strings.Join(lines[start:i], "\n"), start + 1})
	}
	return out
}

// snippetFile returns the Go file a README block is built as, in package
// pkg. A line directive makes the compiler's errors name README.md lines.
func snippetFile(pkg string, b block) string {
	text := fmt.Sprintf("//line README.md:%d\n%s", b.line, b.text)
	if strings.HasPrefix(strings.TrimSpace(b.text), "package ") {
		return text
	}
	var imports []string
	for name, path := range snippetImports {
		if regexp.MustCompile(`\b` + name + `\.`).MatchString(b.text) {
			imports = append(imports, fmt.Sprintf("%s %q", name, path))
		}
	}
	sort.Strings(imports)
	head := "package " + pkg + "\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\n"
	if len(imports) == 0 {
		head = "package " + pkg + "\n\n"
	}
	if _, err := parser.ParseFile(token.NewFileSet(), "", head+text, 0); err == nil {
		return head + text // declarations
	}
	return head + "func _() {\n" + text + "\n}\n" // statements
}

// TestReadmeNamesTestsThatExist: every test the README and the pages of
// docs/ name (the guarantees say which test holds each promise) is a test
// function of the tree, nested modules included. A row once named a test
// that did not exist, and `go test -run` on it passed, running nothing.
func TestReadmeNamesTestsThatExist(t *testing.T) {
	t.Parallel()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no page in docs/ (%v): the test would check the README alone", err)
	}
	texts := map[string][]byte{}
	for _, name := range append([]string{"README.md"}, pages...) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		texts[name] = b
	}
	have := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && path != ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range decl.FindAllSubmatch(b, -1) {
			have[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for page, text := range texts {
		for _, m := range regexp.MustCompile("`(Test\\w+)`").FindAllSubmatch(text, -1) {
			if name := string(m[1]); !have[name] {
				t.Errorf("%s names %s, which no _test.go of the tree declares", page, name)
			}
		}
	}
}
